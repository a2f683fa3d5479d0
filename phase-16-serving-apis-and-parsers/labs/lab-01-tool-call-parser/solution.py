"""Lab 01 reference solution: tool calls out of streamed model text (Hermes / Qwen format).

A tool-calling model writes ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``
inside its reply. Two hold-backs turn that text into structured calls while it streams:

- in content, hold only the longest suffix that could still become ``<tool_call>``
  (the stop-string rule of lab-05, with one "stop");
- inside a block, wait for ``</tool_call>``, but only outside JSON strings: an argument
  may well contain the text "</tool_call>".

A block that does not hold a well-formed call is an error, raised with the raw text:
a call must never vanish, and must never leak into the reply as if it were prose.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, NamedTuple

START_TAG = "<tool_call>"
END_TAG = "</tool_call>"


@dataclass(frozen=True)
class ToolCall:
    """One structured call: the function's name and its arguments, parsed."""

    name: str
    arguments: dict[str, Any]


@dataclass
class ParsedOutput:
    """A whole reply, parsed: the prose outside the blocks, and the calls in order."""

    content: str
    tool_calls: list[ToolCall] = field(default_factory=list)


@dataclass
class DeltaMessage:
    """What one streaming step adds: more prose, and any calls whose block just closed."""

    content: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)


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


def find_end_tag(body: str, state: ScanState = FRESH_SCAN) -> tuple[int | None, ScanState]:
    """Index of ``END_TAG`` in ``body`` outside JSON strings, resuming from ``state``.

    Returns ``(None, state)`` when the tag has not arrived yet; ``state`` then stops at
    a ``<`` that might be the start of the tag, so the next call looks at it again.
    """
    position, in_string, escaped = state
    while position < len(body):
        char = body[position]
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char == "<":
            candidate = body[position : position + len(END_TAG)]
            if candidate == END_TAG:
                return position, ScanState(position, in_string, escaped)
            if END_TAG.startswith(candidate):
                break  # the body ends in what may be the start of the end tag: wait
        position += 1
    return None, ScanState(position, in_string, escaped)


def parse_call(raw: str) -> ToolCall:
    """The call in one block's body, or ``ToolCallParseError`` saying what is wrong with it."""
    try:
        payload = json.loads(raw)
    except json.JSONDecodeError as error:
        raise ToolCallParseError(raw, f"not valid JSON: {error.msg} at position {error.pos}") from error
    if not isinstance(payload, dict):
        raise ToolCallParseError(raw, "the body must be a JSON object")
    if not isinstance(payload.get("name"), str) or not payload["name"]:
        raise ToolCallParseError(raw, 'the object needs a non-empty string "name"')
    if not isinstance(payload.get("arguments"), dict):
        raise ToolCallParseError(raw, '"arguments" must be a JSON object')
    return ToolCall(payload["name"], payload["arguments"])


def _partial_tag_len(text: str) -> int:
    """Length of the longest suffix of ``text`` that is a proper prefix of ``START_TAG``."""
    for size in range(min(len(START_TAG) - 1, len(text)), 0, -1):
        if text.endswith(START_TAG[:size]):
            return size
    return 0


def parse_tool_calls(text: str) -> ParsedOutput:
    """Split a whole reply into its prose and its tool calls.

    A block left open at the end is accepted when its body is already a complete call
    (the model stopped right after the JSON); otherwise it is an error.
    """
    content: list[str] = []
    calls: list[ToolCall] = []
    rest = text
    while (start := rest.find(START_TAG)) != -1:
        content.append(rest[:start])
        body = rest[start + len(START_TAG) :]
        end, _ = find_end_tag(body)
        if end is None:
            calls.append(parse_call(body))  # open at the end of the reply
            return ParsedOutput("".join(content), calls)
        calls.append(parse_call(body[:end]))
        rest = body[end + len(END_TAG) :]
    content.append(rest)
    return ParsedOutput("".join(content), calls)


class StreamingToolParser:
    """``feed`` text deltas, ``finish`` at the end; each returns a ``DeltaMessage``.

    All contents together equal ``parse_tool_calls(whole).content`` and all calls
    together its ``tool_calls``, for every way of cutting the reply into deltas. A
    ``feed`` that meets a malformed call raises ``ToolCallParseError`` and changes nothing.
    """

    def __init__(self) -> None:
        self.held_text = ""  # prose held back: it could still become "<tool_call>"
        self._block: str | None = None  # the open block's body, or None outside any block
        self._scan = FRESH_SCAN
        self._finished = False

    def feed(self, delta: str) -> DeltaMessage:
        if not isinstance(delta, str):
            raise TypeError(f"feed() takes the next text delta as a str, got {type(delta).__name__}")
        if self._finished:
            raise RuntimeError("feed() after finish(): this reply is over")
        saved = (self.held_text, self._block, self._scan)  # immutable values: a free snapshot
        try:
            return self._consume(delta)
        except ToolCallParseError:
            self.held_text, self._block, self._scan = saved
            raise

    def _consume(self, text: str) -> DeltaMessage:
        out = DeltaMessage()
        rest: str | None = text
        while rest is not None:  # alternate between prose and blocks until the delta is used up
            rest = self._consume_prose(rest, out) if self._block is None else self._consume_block(rest, out)
        return out

    def _consume_prose(self, text: str, out: DeltaMessage) -> str | None:
        """Show prose up to a start tag (returning what follows it), or up to a possible partial tag."""
        window = self.held_text + text
        start = window.find(START_TAG)
        if start == -1:
            keep = _partial_tag_len(window)
            out.content += window[: len(window) - keep]
            self.held_text = window[len(window) - keep :]
            return None
        out.content += window[:start]
        self.held_text, self._block, self._scan = "", "", FRESH_SCAN
        return window[start + len(START_TAG) :]

    def _consume_block(self, text: str, out: DeltaMessage) -> str | None:
        """Grow the open block; when its end tag arrives, parse the call and return what follows."""
        assert self._block is not None
        self._block += text
        end, self._scan = find_end_tag(self._block, self._scan)
        if end is None:
            return None
        out.tool_calls.append(parse_call(self._block[:end]))
        rest, self._block = self._block[end + len(END_TAG) :], None
        return rest

    def finish(self) -> DeltaMessage:
        if self._finished:
            raise RuntimeError("finish() was already called for this reply")
        if self._block is not None:  # a block left open: the batch rule decides
            call = parse_call(self._block)
            self._block, self._finished = None, True
            return DeltaMessage(tool_calls=[call])
        held, self.held_text, self._finished = self.held_text, "", True
        return DeltaMessage(content=held)
