"""Wrong on purpose: each piece of text is a segment of its own (`user\\n`, then the content), never joined to the
text before it. The ids can still match on these vocabularies, but the rule is the template's: a run of text between
two control tokens is encoded as one text, so a tokenizer whose merges cross the seam gets the template's ids."""

from instructor.variants import run_reference_with_mistake

MISTAKE = {"        if last is not None and last.kind == \"text\" and not at_start:\n": "        if False:\n"}
run_reference_with_mistake("lab-10", MISTAKE, globals())

MUST_FAIL = ["test_chatml_spells_the_template", "test_chatml_spells_the_template_on_any_benign_chat"]
MAY_COST = [2]
