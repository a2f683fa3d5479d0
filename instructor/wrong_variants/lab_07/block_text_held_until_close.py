"""Wrong on purpose: a text block's deltas are kept until the block closes, then sent as one text_delta.

The blocks still follow the grammar and the text joins up, but the client sees nothing of the answer until the
model moves on to another block or ends: streaming that does not stream.
"""

from typing import Any

from mini_vllm.labs import load_lab

_solution = load_lab("lab-07", "solution")
globals().update({name: value for name, value in vars(_solution).items() if not name.startswith("__")})

MUST_FAIL = ["test_each_step_goes_out_in_its_own_blocks"]
MAY_COST = [4]


class MessagesEventFormatter(_solution.MessagesEventFormatter):
    def text_delta(self, text: str) -> list[dict[str, Any]]:
        events = self._open("text")
        self._held = getattr(self, "_held", "") + text  # the mistake: kept, not sent
        return events

    def close(self, status: str = "completed") -> list[dict[str, Any]]:
        held, self._held = getattr(self, "_held", ""), ""
        if self._open_type == "text" and held:
            return [self._delta({"type": "text_delta", "text": held}), *super().close(status)]
        return super().close(status)
