"""Wrong on purpose: continue_final_message on a chat whose last message is the user's is accepted. There is no
assistant message to continue, so the prompt ends inside the user's turn (ChatML) or as if no prefill was asked
(Mistral): the client asked for something that cannot be done and was not told."""

from instructor.variants import run_reference_with_mistake

MISTAKE = {"    if continue_final_message and (not messages or messages[-1].role != \"assistant\"):\n":
           "    if False:\n"}
run_reference_with_mistake("lab-10", MISTAKE, globals())

MUST_FAIL = ["test_a_prefill_needs_an_assistant_message_last"]
MAY_COST = [4]
