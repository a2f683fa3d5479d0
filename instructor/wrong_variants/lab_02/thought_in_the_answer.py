"""Wrong on purpose: the reasoning parser is never wired in, so the thought (tags and all) is the answer."""

from typing import Any

from mini_vllm.labs import load_lab

_solution = load_lab("lab-02", "solution")
globals().update({name: value for name, value in vars(_solution).items() if not name.startswith("__")})

MUST_FAIL = ["test_pipeline_alone_keeps_stop_strings_out_of_the_thought", "test_reasoning_arrives_in_its_own_field",
             "test_a_thought_then_a_tool_call_without_an_end_tag", "test_enable_thinking_starts_inside_the_thought"]
MAY_COST = [4]


class OutputPipeline(_solution.OutputPipeline):
    def __init__(self, tokenizer: Any, prompt_ids: Any, params: Any, parse_tool_calls: bool, **options: Any) -> None:
        super().__init__(tokenizer, prompt_ids, params, parse_tool_calls)  # the reasoning options dropped
