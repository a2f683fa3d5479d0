"""Wrong on purpose: on Mistral 7B v0.1, `[INST] `, the content and ` [/INST]` are encoded as three texts, each
with its own dummy-prefix ``▁``: spaces the model never saw in training (mistralai/mistral-common#3)."""

from instructor.variants import run_reference_with_mistake

MISTAKE = {'                out.text(f"{INST} {text} {END_INST}", at_start=True)':
           '                out.text(f"{INST} ", at_start=True)\n'
           '                out.text(text, at_start=True)\n'
           '                out.text(f" {END_INST}", at_start=True)'}
run_reference_with_mistake("lab-10", MISTAKE, globals())

MUST_FAIL = ["test_mistral_equals_mistral_common", "test_mistral_equals_mistral_common_on_any_benign_chat"]
MAY_COST = [3]
