"""Lab 02's given value: what one engine step adds to the reply."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class StepOutput:
    """What one engine step (or the end of the stream) adds to the reply."""

    text: str = ""
    tool_calls: list[Any] = field(default_factory=list)  # lab-01 ToolCall objects: calls completed in this step
    tool_call_deltas: list[Any] = field(default_factory=list)  # lab-01 ToolCallDelta objects: calls as they stream
    finish_reason: str | None = None  # only on the last output: "stop", "length" or "tool_calls"
    stop_reason: str | None = None  # the stop string that ended the reply, if one did
    reasoning: str = ""  # more of the model's thought (lab-06), sent apart from the answer

