"""Wrong on purpose: lab-04 is built without the prompt's ids, so the first reply token is decoded
with nothing before it, and a SentencePiece reply that starts with a space loses that space.

A decoding bug (task 1 only). Issue 24 found it scoring full marks under one command and not under
another: an @example of the several-tokens test now pins it.
"""

from instructor.variants import run_reference_with_mistake

MISTAKE = {
    "tokenizer, prompt_ids, skip_special_tokens=params.skip_special_tokens)":
        "tokenizer, skip_special_tokens=params.skip_special_tokens)",
}
run_reference_with_mistake("lab-02", MISTAKE, globals())

MUST_FAIL = ["test_several_tokens_per_step_change_nothing"]
MAY_COST = [1]
