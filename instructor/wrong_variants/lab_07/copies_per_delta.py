"""Wrong on purpose: keeps the open item's text as one string and adds each delta to it.

The events are the same, but every delta copies the whole item so far: the cost of a delta grows
with the item, and a long reply costs the square of its length.
"""

from typing import Any

from mini_vllm.labs import load_lab

_solution = load_lab("lab-07", "solution")
globals().update({name: value for name, value in vars(_solution).items() if not name.startswith("__")})

MUST_FAIL = ["test_a_delta_costs_the_same_at_the_end_of_a_long_item",
             "test_an_arguments_delta_costs_the_same_at_the_end_of_a_long_call"]
MAY_COST = [1, 2]


class ResponsesEventFormatter(_solution.ResponsesEventFormatter):
    def reasoning_delta(self, text: str) -> list[dict[str, Any]]:
        events = super().reasoning_delta(text)
        self._copy()
        return events

    def text_delta(self, text: str) -> list[dict[str, Any]]:
        events = super().text_delta(text)
        self._copy()
        return events

    def call_delta(self, delta: Any) -> list[dict[str, Any]]:
        events = super().call_delta(delta)
        self._copy()
        return events

    def _copy(self) -> None:
        self._parts = ["".join(self._parts)]  # the mistake: written += delta, a copy of the item so far
