"""Wrong on purpose: function_call_arguments.done re-serialises the parsed arguments instead of joining the deltas.

json.dumps escapes the CJK and emoji the model wrote, so .done no longer equals what the deltas said.
"""

import contextlib
import json
from typing import Any

from mini_vllm.labs import load_lab

_solution = load_lab("lab-07", "solution")
globals().update({name: value for name, value in vars(_solution).items() if not name.startswith("__")})

MUST_FAIL = ["test_a_call_is_a_function_call_item", "test_call_items_follow_the_grammar_for_every_reply",
             "test_arguments_done_equals_the_joined_deltas"]
MAY_COST = [2]


class ResponsesEventFormatter(_solution.ResponsesEventFormatter):
    def close(self, status: str = "completed") -> list[dict[str, Any]]:
        events = super().close(status)
        for event in events:
            if event["type"] == "response.function_call_arguments.done":
                with contextlib.suppress(json.JSONDecodeError):  # cut short by max_tokens: left alone
                    event["arguments"] = json.dumps(json.loads(event["arguments"]))
        return events
