"""Wrong on purpose: reasoning is dropped from every assistant turn, the tool loop still going included: the model
loses the plan it made before calling the tool it is now reading the result of."""

from instructor.variants import run_reference_with_mistake

MISTAKE = {"if message.reasoning and k > last_user:": "if message.reasoning and k < last_user:"}
run_reference_with_mistake("lab-10", MISTAKE, globals())

MUST_FAIL = ["test_reasoning_of_earlier_turns_is_dropped_and_an_ongoing_loop_keeps_its_own",
             "test_chatml_spells_the_template_on_any_benign_chat"]
MAY_COST = [2]
