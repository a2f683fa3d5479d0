"""Wrong on purpose: a control segment the vocabulary has no token for is encoded as its text instead of refused.
A template written for another vocabulary then renders silently: `<|im_start|>` on Tekken becomes thirteen
characters the model reads as prose, not a turn."""

from instructor.variants import run_reference_with_mistake

MISTAKE = {"                raise ChatTemplateError(f\"{segment.text!r} is not a special token of this vocabulary\")\n"
           "            ids.append(specials[segment.text])\n":
           "                ids.extend(encode_text(tokenizer, segment.text, segment.at_start))\n"
           "            else:\n"
           "                ids.append(specials[segment.text])\n"}
run_reference_with_mistake("lab-10", MISTAKE, globals())

MUST_FAIL = ["test_a_special_the_vocabulary_lacks_is_refused"]
MAY_COST = [1]
