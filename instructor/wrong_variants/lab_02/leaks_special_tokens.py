"""Wrong on purpose: lab-04 is built without the request's skip_special_tokens, so it keeps its own
default (False) and the end-of-sequence token's text (`</s>`, `<|endoftext|>`) reaches the client.

A decoding bug: it must cost task 1 only (the README's promise), never the finish reason or the
reasoning channel.
"""

from instructor.variants import run_reference_with_mistake

MISTAKE = {
    "tokenizer, prompt_ids, skip_special_tokens=params.skip_special_tokens)": "tokenizer, prompt_ids)",
}
run_reference_with_mistake("lab-02", MISTAKE, globals())

MUST_FAIL = ["test_pipeline_alone_reassembles_the_reply", "test_streamed_chat_reassembles_exactly"]
MAY_COST = [1]
