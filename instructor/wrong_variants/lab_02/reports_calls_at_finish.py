"""Wrong on purpose: StepOutput.tool_calls lists the completed calls only at finish, not in the step
whose end tag closed each one (the fragments still stream, so the wire looks right)."""

from typing import Any

from mini_vllm.labs import load_lab

_solution = load_lab("lab-02", "solution")
globals().update({name: value for name, value in vars(_solution).items() if not name.startswith("__")})

MUST_FAIL = ["test_pipeline_alone_reports_each_completed_call_once"]
MAY_COST = [1]


class OutputPipeline(_solution.OutputPipeline):
    def push(self, token_ids: Any) -> Any:
        out = super().push(token_ids)
        self.__dict__.setdefault("completed", []).extend(out.tool_calls)  # the mistake: kept back
        out.tool_calls = []
        return out

    def finish(self, engine_finish_reason: str) -> Any:
        out = super().finish(engine_finish_reason)
        out.tool_calls = [*self.__dict__.get("completed", []), *out.tool_calls]
        return out
