"""Wrong on purpose: render takes add_generation_prompt and continue_final_message together and quietly opens a
new assistant turn after the prefill the client wanted continued."""

from instructor.variants import run_reference_with_mistake

MISTAKE = {"""    _check_flags(add_generation_prompt, continue_final_message, messages)
    if IM_START in special_tokens(tokenizer):
        return render_chatml(tokenizer, messages, tools, add_generation_prompt, continue_final_message)""":
           """    if IM_START in special_tokens(tokenizer):
        return render_chatml(tokenizer, messages, tools, add_generation_prompt and not continue_final_message,
                             continue_final_message)"""}
run_reference_with_mistake("lab-10", MISTAKE, globals())

MUST_FAIL = ["test_a_generation_prompt_and_a_prefill_at_once_are_refused"]
MAY_COST = [4]
