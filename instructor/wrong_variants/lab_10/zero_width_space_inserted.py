"""Wrong on purpose: a zero-width space is slipped into every special string of client text, so ``encode`` no
longer matches it. No control token gets in, but the text changed: the model reads characters the user never
wrote, and a tool's JSON arguments are no longer the ones sent."""

from instructor.variants import run_reference_with_mistake

MISTAKE = {"    return tokenizer.encode_ordinary(text, at_start=at_start)\n":
           "    for special in special_tokens(tokenizer):\n"
           "        text = text.replace(special, special[:1] + '\\u200b' + special[1:])\n"
           "    return tokenizer.encode_ordinary(text, at_start=at_start)\n"}
run_reference_with_mistake("lab-10", MISTAKE, globals())

MUST_FAIL = ["test_client_text_is_text", "test_text_is_encoded_as_the_vocabulary_encodes_text"]
MAY_COST = [1]
