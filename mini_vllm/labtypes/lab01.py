"""Lab 01's given values: the tool-call tags, the parsed call, streamed progress, and the parse error."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

START_TAG = "<tool_call>"
END_TAG = "</tool_call>"


@dataclass(frozen=True)
class ToolCall:
    """One complete call: the function's name and its arguments, parsed.

    ``arguments_text`` is the JSON text of the arguments exactly as the model wrote it
    (spacing and escapes included), which is what a server sends as ``function.arguments``.
    Equality compares the name and the parsed arguments, not how they were spelled.
    """

    name: str
    arguments: dict[str, Any]
    arguments_text: str | None = field(default=None, compare=False)


@dataclass(frozen=True)
class ToolCallDelta:
    """What one step adds to the call numbered ``index`` (0, 1, ... in the order they were written).

    ``name`` is set on the call's first delta and never again; ``arguments_fragment``
    continues the arguments text exactly where the previous fragment stopped.
    """

    index: int
    name: str | None = None
    arguments_fragment: str = ""


@dataclass
class ParsedOutput:
    """A whole reply, parsed: the prose outside the blocks, and the calls in order."""

    content: str
    tool_calls: list[ToolCall] = field(default_factory=list)


@dataclass
class DeltaMessage:
    """What one streaming step adds: more prose, calls whose block just closed, and streamed call progress."""

    content: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    tool_call_deltas: list[ToolCallDelta] = field(default_factory=list)  # only with stream_arguments=True


class ToolCallParseError(ValueError):
    """A ``<tool_call>`` block that does not hold a well-formed call. Carries the raw block."""

    def __init__(self, raw: str, reason: str) -> None:
        super().__init__(f"malformed tool call ({reason}): {raw!r}")
        self.raw = raw
        self.reason = reason


class ScanState(NamedTuple):
    """Where the search for the end tag stopped, and whether it stopped inside a JSON string."""

    position: int = 0
    in_string: bool = False
    escaped: bool = False


FRESH_SCAN = ScanState()  # a scan that has not started: the default for a new block

