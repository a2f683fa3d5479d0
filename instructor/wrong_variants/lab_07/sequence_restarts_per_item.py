"""Wrong on purpose: numbers each item's events from 0, as if sequence_number were per item."""

from typing import Any

from mini_vllm.labs import load_lab

_solution = load_lab("lab-07", "solution")
globals().update({name: value for name, value in vars(_solution).items() if not name.startswith("__")})

MUST_FAIL = ["test_sequence_numbers_run_on_across_items", "test_items_follow_the_grammar_for_every_reply",
             "test_call_items_follow_the_grammar_for_every_reply"]
MAY_COST = [1, 2]


class ResponsesEventFormatter(_solution.ResponsesEventFormatter):
    def _open(self, kind: str, name: str = "") -> list[dict[str, Any]]:
        if self._item is not None and self._item["type"] == kind and kind != "function_call":
            return []
        closing = self.close()
        self.sequence_number = 0  # the mistake: a fresh count for the new item
        return closing + super()._open(kind, name)
