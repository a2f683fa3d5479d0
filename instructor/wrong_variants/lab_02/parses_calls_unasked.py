"""Wrong on purpose: the tool parser is built whatever parse_tool_calls says, so a request that offers
no tools still has its <tool_call> text taken out of the reply."""

from typing import Any

from mini_vllm.labs import load_lab

_solution = load_lab("lab-02", "solution")
globals().update({name: value for name, value in vars(_solution).items() if not name.startswith("__")})

MUST_FAIL = ["test_pipeline_alone_parses_calls_only_when_asked"]
MAY_COST = [1]


class OutputPipeline(_solution.OutputPipeline):
    def __init__(self, tokenizer: Any, prompt_ids: Any, params: Any, parse_tool_calls: bool,
                 parse_reasoning: bool = False, starts_in_reasoning: bool = False) -> None:
        super().__init__(tokenizer, prompt_ids, params, True,  # the mistake: parse_tool_calls ignored
                         parse_reasoning=parse_reasoning, starts_in_reasoning=starts_in_reasoning)
