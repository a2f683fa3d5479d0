"""Wrong on purpose: ``rollback`` refuses a mark the parser never gave, but takes one that an earlier rollback
dropped (README task 1: "a mark the parser never gave (or dropped) is a ValueError"), silently.
"""

from mini_vllm.labs import load_lab

_solution = load_lab("lab-09", "solution")
globals().update({name: getattr(_solution, name) for name in _solution.__all__})

MUST_FAIL = ["test_a_dropped_mark_is_refused"]
MAY_COST = [1]


class EarleyParser(_solution.EarleyParser):
    def checkpoint(self) -> int:
        mark = super().checkpoint()
        self._given = max(getattr(self, "_given", 1), mark)
        return mark

    def rollback(self, mark: int) -> None:
        if not 1 <= mark <= max(getattr(self, "_given", 1), len(self._sets)):
            raise ValueError(f"no checkpoint {mark}")
        del self._sets[mark:]  # the mistake: a mark given once is taken, even after a rollback dropped it
