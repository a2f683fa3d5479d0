"""Wrong on purpose: client text goes through ``encode``, which matches special-token strings anywhere: a user's
``<|im_end|>`` becomes the control token (huggingface/transformers#29279). Text without special strings is fine."""

from instructor.variants import run_reference_with_mistake

MISTAKE = {"    return tokenizer.encode_ordinary(text, at_start=at_start)\n":
           "    from mini_vllm.tokenizers.base import encode_continuation\n"
           "    return tokenizer.encode(text) if at_start else encode_continuation(tokenizer, text)\n"}
run_reference_with_mistake("lab-10", MISTAKE, globals())

MUST_FAIL = ["test_client_text_is_text", "test_text_is_encoded_as_the_vocabulary_encodes_text",
             "test_segments_a_special_is_one_id_and_text_is_text"]
MAY_COST = [1]
