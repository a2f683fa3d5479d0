"""Wrong on purpose: a step that brings both thought and answer sends them in two chunks, not as
delta.reasoning before delta.content in one delta."""

from typing import Any

from mini_vllm.labs import load_lab
from mini_vllm.labtypes.lab02 import StepOutput

_solution = load_lab("lab-02", "solution")
globals().update({name: value for name, value in vars(_solution).items() if not name.startswith("__")})

MUST_FAIL = ["test_thought_and_answer_of_one_step_go_out_in_one_delta"]
MAY_COST = [3]


class ChunkFormatter(_solution.ChunkFormatter):
    def chunks(self, out: Any) -> list[dict[str, Any]]:
        if self.kind != "chat" or not (out.reasoning and out.text):
            return super().chunks(out)
        thought = super().chunks(StepOutput(reasoning=out.reasoning))  # the mistake: a chunk of its own
        rest = StepOutput(out.text, out.tool_calls, out.tool_call_deltas, out.finish_reason, out.stop_reason)
        return thought + super().chunks(rest)
