"""Wrong on purpose: finish never says which stop string ended the reply (stop_reason stays None)."""

from typing import Any

from mini_vllm.labs import load_lab

_solution = load_lab("lab-02", "solution")
globals().update({name: value for name, value in vars(_solution).items() if not name.startswith("__")})

MUST_FAIL = ["test_stop_reason_names_the_stop_that_ended_the_reply"]
MAY_COST = [2]


class OutputPipeline(_solution.OutputPipeline):
    def finish(self, engine_finish_reason: str) -> Any:
        out = super().finish(engine_finish_reason)
        out.stop_reason = None  # the mistake: the client cannot tell a stop string from EOS
        return out
