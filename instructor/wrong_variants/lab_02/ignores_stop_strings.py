"""Wrong on purpose: never wires in the stop-string checker, so the client reads past the stop."""

from typing import Any

from mini_vllm.labs import load_lab

_solution = load_lab("lab-02", "solution")
globals().update({name: value for name, value in vars(_solution).items() if not name.startswith("__")})

MUST_FAIL = ["test_stop_string_is_honoured", "test_include_stop_str_in_output"]
MAY_COST = [1]  # the stop checker is built in __init__ and run by push: task 1


class OutputPipeline(_solution.OutputPipeline):
    def __init__(self, tokenizer: Any, prompt_ids: Any, params: Any, parse_tool_calls: bool, **options: Any) -> None:
        super().__init__(tokenizer, prompt_ids, params.__class__(max_tokens=params.max_tokens), parse_tool_calls,
                         **options)
