"""Wrong on purpose: special-token strings are deleted from client text before it is encoded. No control token
gets in, but the user's text is not what the model reads (a question about `<|im_end|>` loses its subject)."""

from instructor.variants import run_reference_with_mistake

MISTAKE = {"    return tokenizer.encode_ordinary(text, at_start=at_start)\n":
           "    for special in special_tokens(tokenizer):\n"
           "        text = text.replace(special, '')\n"
           "    return tokenizer.encode_ordinary(text, at_start=at_start)\n"}
run_reference_with_mistake("lab-10", MISTAKE, globals())

MUST_FAIL = ["test_client_text_is_text", "test_text_is_encoded_as_the_vocabulary_encodes_text"]
MAY_COST = [1]
