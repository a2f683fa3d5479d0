"""Wrong on purpose: client text is encoded one character at a time. No special id gets in and the tokens spell the
text, but they are not the ids the vocabulary gives that text (no merges): the model reads a prompt it never saw
in training, and it costs several times the tokens."""

from instructor.variants import run_reference_with_mistake

MISTAKE = {"    return tokenizer.encode_ordinary(text, at_start=at_start)\n":
           "    return [i for k, character in enumerate(text)\n"
           "            for i in tokenizer.encode_ordinary(character, at_start=at_start and k == 0)]\n"}
run_reference_with_mistake("lab-10", MISTAKE, globals())

MUST_FAIL = ["test_text_without_special_strings_is_unchanged", "test_text_is_encoded_as_the_vocabulary_encodes_text"]
MAY_COST = [1]
