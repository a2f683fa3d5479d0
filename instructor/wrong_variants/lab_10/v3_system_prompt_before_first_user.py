"""Wrong on purpose: on Tekken (v3) the system prompt is written before the first user message, as v1 writes it.
mistral-common's v3 writes it before the last one, so a multi-turn chat's ids differ from what the model saw."""

from instructor.variants import run_reference_with_mistake

MISTAKE = {"if system and k == (users[-1] if v3 else users[0]):": "if system and k == users[0]:"}
run_reference_with_mistake("lab-10", MISTAKE, globals())

MUST_FAIL = ["test_mistral_equals_mistral_common"]
MAY_COST = [3]
