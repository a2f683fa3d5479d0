"""Wrong on purpose: finish_reason is always "stop", so clients never learn a tool was called."""

from typing import Any

from mini_vllm.labs import load_lab

_solution = load_lab("lab-02", "solution")
globals().update({name: value for name, value in vars(_solution).items() if not name.startswith("__")})

MUST_FAIL = ["test_a_reply_with_calls_finishes_with_tool_calls", "test_max_tokens_gives_length"]
MAY_COST = [2]


class OutputPipeline(_solution.OutputPipeline):
    def finish(self, engine_finish_reason: str) -> Any:
        out = super().finish(engine_finish_reason)
        out.finish_reason = "stop"
        return out
