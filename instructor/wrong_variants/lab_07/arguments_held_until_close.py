"""Wrong on purpose: a call's arguments are kept until the item closes, then sent as one delta just before .done.

The stream still follows the grammar and every text joins up, but nothing of the call reaches the client while the
model writes it: a client that starts parsing (or showing) a call as it streams waits for the whole of it.
"""

from typing import Any

from mini_vllm.labs import load_lab

_solution = load_lab("lab-07", "solution")
globals().update({name: value for name, value in vars(_solution).items() if not name.startswith("__")})

MUST_FAIL = ["test_each_steps_arguments_go_out_in_its_own_events"]
MAY_COST = [2]


class ResponsesEventFormatter(_solution.ResponsesEventFormatter):
    def call_delta(self, delta: Any) -> list[dict[str, Any]]:
        events = self._open("function_call", delta.name) if delta.name is not None else []
        item = self._item
        if item is None or item["type"] != "function_call":
            raise ValueError(f"arguments for call {delta.index} arrived before its name")
        if delta.arguments_fragment:
            self._parts.append(delta.arguments_fragment)  # the mistake: kept, not sent
        return events

    def close(self, status: str = "completed") -> list[dict[str, Any]]:
        item = self._item
        if item is None or item["type"] != "function_call" or not self._parts:
            return super().close(status)
        held = self._emit("response.function_call_arguments.delta", item_id=item["id"],
                          output_index=len(self.output), delta="".join(self._parts))
        return [held, *super().close(status)]
