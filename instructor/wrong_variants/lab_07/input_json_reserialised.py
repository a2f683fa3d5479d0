"""Wrong on purpose: holds a tool_use block's fragments and sends one input_json_delta of the re-serialised object.

The arguments no longer stream, and json.dumps escapes what the model wrote (東京 becomes \\u6771\\u4eac).
"""

import json
from typing import Any

from mini_vllm.labs import load_lab

_solution = load_lab("lab-07", "solution")
globals().update({name: value for name, value in vars(_solution).items() if not name.startswith("__")})

MUST_FAIL = ["test_tool_use_input_is_the_model_text_as_written", "test_blocks_follow_the_grammar_for_every_reply"]
MAY_COST = [4]


class MessagesEventFormatter(_solution.MessagesEventFormatter):
    def call_delta(self, delta: Any) -> list[dict[str, Any]]:
        if delta.name is not None:
            self._held = ""
        self._held = getattr(self, "_held", "") + delta.arguments_fragment
        return super().call_delta(type(delta)(delta.index, delta.name, ""))

    def close(self, status: str = "completed") -> list[dict[str, Any]]:
        held = getattr(self, "_held", "")
        if self._open_type == "tool_use" and held:
            self._held = ""
            try:
                text = json.dumps(json.loads(held))
            except json.JSONDecodeError:
                text = held
            return [self._delta({"type": "input_json_delta", "partial_json": text}), *super().close(status)]
        return super().close(status)
