"""Wrong on purpose: the structure writes ``<s>`` and render adds BOS again, as a tokenizer's
``add_special_tokens=True`` does over a template that already wrote it (vllm-project/vllm#16853)."""

from instructor.variants import run_reference_with_mistake

MISTAKE = {"    return render_mistral(tokenizer, messages, tools, continue_final_message)\n":
           "    return [special_tokens(tokenizer)[BOS], *render_mistral(tokenizer, messages, tools, "
           "continue_final_message)]\n"}
run_reference_with_mistake("lab-10", MISTAKE, globals())

MUST_FAIL = ["test_bos_exactly_once", "test_the_generation_prompt_opens_the_reply"]
MAY_COST = [4]
