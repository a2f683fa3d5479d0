"""Wrong on purpose: when max_tokens cuts a tool call, the partial call is dropped silently."""

from typing import Any

from mini_vllm.labs import load_lab

_solution = load_lab("lab-02", "solution")
globals().update({name: value for name, value in vars(_solution).items() if not name.startswith("__")})

MUST_FAIL = ["test_length_inside_a_tool_call_is_still_length"]
MAY_COST = [2]


class OutputPipeline(_solution.OutputPipeline):
    def finish(self, engine_finish_reason: str) -> Any:
        out = super().finish(engine_finish_reason)
        if out.finish_reason == "length" and "<tool_call>" in out.text:
            out.text = out.text[: out.text.index("<tool_call>")]  # the mistake: what the model wrote vanishes
        return out
