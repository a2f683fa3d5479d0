"""Wrong on purpose: finish never flushes the stop checker, so a tail held for a stop that never came is lost."""

from typing import Any

from mini_vllm.labs import load_lab

_solution = load_lab("lab-02", "solution")
globals().update({name: value for name, value in vars(_solution).items() if not name.startswith("__")})

MUST_FAIL = ["test_finish_releases_text_held_for_a_possible_stop"]
MAY_COST = [2]


class OutputPipeline(_solution.OutputPipeline):
    def finish(self, engine_finish_reason: str) -> Any:
        self._stops.flush = lambda: ""  # the mistake: what the stop checker still holds is never released
        return super().finish(engine_finish_reason)
