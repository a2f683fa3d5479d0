"""Wrong on purpose: every tool result opens a user turn of its own. The template puts consecutive results in one
user turn (Qwen's models were trained on that): two calls answered make two turns the model never saw."""

from instructor.variants import run_reference_with_mistake

MISTAKE = {"            opens = k == 0 or messages[k - 1].role != \"tool\"\n": "            opens = True\n",
           "            closes = k == len(messages) - 1 or messages[k + 1].role != \"tool\"\n":
           "            closes = True\n"}
run_reference_with_mistake("lab-10", MISTAKE, globals())

MUST_FAIL = ["test_chatml_spells_the_template"]
MAY_COST = [2]
