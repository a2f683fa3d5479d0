"""Wrong on purpose: every assistant turn's reasoning is written back, also before the last user message: the
prompt grows with every old thought, and the model sees a history unlike the one it was trained on."""

from instructor.variants import run_reference_with_mistake

MISTAKE = {"if message.reasoning and k > last_user:": "if message.reasoning:"}
run_reference_with_mistake("lab-10", MISTAKE, globals())

MUST_FAIL = ["test_reasoning_of_earlier_turns_is_dropped_and_an_ongoing_loop_keeps_its_own",
             "test_chatml_spells_the_template_on_any_benign_chat"]
MAY_COST = [2]
