"""Lab 01 reference solution: tool calls out of streamed model text (Hermes / Qwen format).

A tool-calling model writes ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``
inside its reply. Two hold-backs turn that text into structured calls while it streams:

- in content, hold only the longest suffix that could still become ``<tool_call>``
  (the stop-string rule of lab-05, with one "stop");
- inside a block, wait for ``</tool_call>``, but only outside JSON strings: an argument
  may well contain the text "</tool_call>".

With ``stream_arguments=True`` a call is also streamed while it is written: its name
once, as soon as the name's closing quote arrives, then its arguments as fragments of
the text the model wrote (never re-serialised, never taken back).

A block that does not hold a well-formed call is an error, raised with the raw text:
a call must never vanish, and must never leak into the reply as if it were prose.
"""

from __future__ import annotations

import json
import re
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

# The only characters that can change the scanners' state; everything between them is skipped in C.
_IN_STRING = re.compile(r'["\\]')
_OUTSIDE_STRING = re.compile(r'["<]')
_NESTED = re.compile(r'["{}\[\]]')
_SPACE = re.compile(r"[ \t\n\r]*")
_JSON_SPACE = " \t\n\r"


def find_end_tag(body: str, state: ScanState = FRESH_SCAN) -> tuple[int | None, ScanState]:
    """Index of ``END_TAG`` in ``body`` outside JSON strings, resuming from ``state``.

    Returns ``(None, state)`` when the tag has not arrived yet; ``state`` then stops at
    a ``<`` that might be the start of the tag, so the next call looks at it again.
    """
    position, in_string, escaped = state
    while position < len(body):
        if escaped:  # the character after a backslash is always part of the string
            position, escaped = position + 1, False
            continue
        found = (_IN_STRING if in_string else _OUTSIDE_STRING).search(body, position)
        if found is None:
            return None, ScanState(len(body), in_string, False)
        position = found.start()
        char = body[position]
        if char == "\\":
            escaped = True
        elif char == '"':
            in_string = not in_string
        else:  # a "<" outside strings
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
    return ToolCall(payload["name"], payload["arguments"], _arguments_text(raw))


def _arguments_text(raw: str) -> str:
    """The slice of ``raw`` (a valid JSON object) that holds its "arguments" value, as written.

    ``raw_decode`` parses one value at a given index and says where it ended, so the
    envelope can be walked key by key without ever re-serialising a value.
    """
    decoder = json.JSONDecoder()
    position = _SPACE.match(raw, _SPACE.match(raw).end() + 1).end()  # past the opening "{"
    text = ""
    while raw[position] != "}":
        key, position = decoder.raw_decode(raw, position)
        start = _SPACE.match(raw, _SPACE.match(raw, position).end() + 1).end()  # past the ":"
        _, end = decoder.raw_decode(raw, start)
        if key == "arguments":
            text = raw[start:end]  # a repeated key: the last one wins, as in json.loads
        position = _SPACE.match(raw, end).end()
        if raw[position] == ",":
            position = _SPACE.match(raw, position + 1).end()
    return text


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


class CallReader:
    """Follows one call's JSON body as it arrives and streams its arguments as written.

    A few scalars (nesting depth, string state, the envelope key being read) are enough
    to know, character by character, whether a character belongs to the value of
    ``"arguments"``, so each character is looked at once and nothing is ever taken back.
    Arguments written before the name wait (in ``held``) until the name is known.
    The reader never raises: whether the call is well formed is ``parse_call``'s verdict.
    """

    def __init__(self, index: int) -> None:
        self.index = index
        self.name: str | None = None
        self.held: list[str] = []  # arguments text read while the name was still unknown
        self._name_sent = False
        self._depth = 0  # 0: before the envelope's "{", 1: inside it, 2+: inside a value
        self._in_string = False
        self._escaped = False
        self._step = "open"  # at depth <= 1: open, key, colon, value, scalar, after, done
        self._key: str | None = None  # the envelope key whose value comes next
        self._string: list[str] | None = None  # raw text of a key or of the name being read
        self._arguments = "before"  # before, inside, after (only the first "arguments" streams)
        self._arguments_end = 0  # where the arguments value ended in the piece being read

    def feed(self, text: str) -> ToolCallDelta | None:
        """Read the next piece of the body; the call's progress, or None when there is nothing to send."""
        pieces: list[str] = []
        start = 0 if self._arguments == "inside" else None  # where arguments text begins in `text`
        position = 0
        while position < len(text) and self._step != "done":
            before = position
            position = self._advance(text, position)
            if start is None and self._arguments == "inside":
                start = before  # the character just read opened the arguments value
            if start is not None and self._arguments == "after":
                pieces.append(text[start : self._arguments_end])
                start = None
        if start is not None:
            pieces.append(text[start:])
        if self.name is None:
            self.held.extend(pieces)
            return None
        fragment = "".join([*self.held, *pieces])
        self.held.clear()
        if self._name_sent and not fragment:
            return None
        delta = ToolCallDelta(self.index, None if self._name_sent else self.name, fragment)
        self._name_sent = True
        return delta

    def _advance(self, text: str, position: int) -> int:
        """Consume one character, or a run of characters that cannot change the state; the next position."""
        if self._escaped:  # the character after a backslash that ended the previous piece
            self._keep(text[position])
            self._escaped = False
            return position + 1
        if self._in_string:
            found = _IN_STRING.search(text, position)
            stop = len(text) if found is None else found.start()
            self._keep(text[position:stop])
            if found is None:
                return stop
            if text[stop] == "\\":
                self._keep(text[stop : stop + 2])
                self._escaped = stop + 1 == len(text)
                return stop + 2
            self._in_string = False
            return self._string_closed(stop + 1) if self._depth == 1 else stop + 1
        if self._depth >= 2:
            found = _NESTED.search(text, position)
            if found is None:
                return len(text)
            char, stop = found.group(), found.end()
            if char == '"':
                self._in_string = True
            elif char in "{[":
                self._depth += 1
            else:
                self._depth -= 1
                if self._depth == 1:
                    return self._value_ended(stop)
            return stop
        return self._envelope(text[position], position)

    def _envelope(self, char: str, position: int) -> int:
        """One character of the envelope itself (depth 0 or 1)."""
        step = self._step
        if step == "open":
            if char == "{":
                self._depth, self._step = 1, "key"
            elif char not in _JSON_SPACE:
                self._step = "done"  # not an object: parse_call will say so
        elif step == "key":
            if char == '"':
                self._in_string, self._string = True, []
            elif char == "}":
                self._depth, self._step = 0, "done"
        elif step == "colon":
            if char == ":":
                self._step = "value"
        elif step == "value" and char not in _JSON_SPACE:
            if self._key == "arguments" and self._arguments == "before":
                self._arguments = "inside"
            if char == '"':
                self._in_string, self._step = True, "after"
                self._string = [] if self._key == "name" and self.name is None else None
            elif char in "{[":
                self._depth, self._step = 2, "after"
            else:
                self._step = "scalar"
        elif step == "scalar":
            if char in _JSON_SPACE or char in ",}]":
                self._step = "after"
                return self._value_ended(position)  # this character is not part of the value: read it again
        elif step == "after":
            if char == ",":
                self._step = "key"
            elif char == "}":
                self._depth, self._step = 0, "done"
        return position + 1

    def _string_closed(self, position: int) -> int:
        raw, self._string = self._string, None
        if self._step == "key":
            self._key, self._step = _decode_string(raw), "colon"
            return position
        if raw is not None:
            self.name = _decode_string(raw) or None
        return self._value_ended(position)

    def _value_ended(self, position: int) -> int:
        """A value of the envelope ended just before ``position``; if it was the arguments, they are complete."""
        if self._arguments == "inside":
            self._arguments, self._arguments_end = "after", position
        return position

    def _keep(self, raw: str) -> None:
        if self._string is not None:
            self._string.append(raw)


def _decode_string(raw: list[str] | None) -> str | None:
    """A JSON string's value from its raw inside (escapes included); None if it is not valid."""
    try:
        return str(json.loads('"' + "".join(raw or []) + '"'))
    except json.JSONDecodeError:
        return None


class _OpenBlock(NamedTuple):
    """The block being read. Its body is kept in pieces and joined once, when the block closes."""

    pieces: list[str]  # the body so far, minus `unscanned`
    unscanned: str  # the tail find_end_tag has not cleared yet: at most a partial end tag
    scan: ScanState  # where to resume find_end_tag on `unscanned` + the next delta
    reader: CallReader | None  # streams the call's name and arguments (stream_arguments=True)


class StreamingToolParser:
    """``feed`` text deltas, ``finish`` at the end; each returns a ``DeltaMessage``.

    All contents together equal ``parse_tool_calls(whole).content`` and all calls
    together its ``tool_calls``, for every way of cutting the reply into deltas. A
    ``feed`` that meets a malformed call raises ``ToolCallParseError`` and changes nothing.
    With ``stream_arguments=True``, ``tool_call_deltas`` also stream each call as it is written.
    """

    def __init__(self, stream_arguments: bool = False) -> None:
        self.stream_arguments = stream_arguments
        self.held_text = ""  # prose held back: it could still become "<tool_call>"
        self._block: _OpenBlock | None = None  # the open block, or None outside any block
        self._calls_opened = 0
        self._finished = False

    def feed(self, delta: str) -> DeltaMessage:
        if not isinstance(delta, str):
            raise TypeError(f"feed() takes the next text delta as a str, got {type(delta).__name__}")
        if self._finished:
            raise RuntimeError("feed() after finish(): this reply is over")
        # A snapshot in O(1): every field is immutable except the open block's list of
        # pieces, which only grows, so remembering its length is enough to undo a feed.
        saved = (self.held_text, self._block, self._calls_opened)
        saved_pieces = len(self._block.pieces) if self._block else 0
        try:
            return self._consume(delta)
        except ToolCallParseError:
            self.held_text, self._block, self._calls_opened = saved
            if self._block is not None:
                del self._block.pieces[saved_pieces:]
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
        reader = CallReader(self._calls_opened) if self.stream_arguments else None
        self.held_text, self._block = "", _OpenBlock([], "", FRESH_SCAN, reader)
        self._calls_opened += 1
        return window[start + len(START_TAG) :]

    def _consume_block(self, text: str, out: DeltaMessage) -> str | None:
        """Read more of the open block; when its end tag arrives, parse the call and return what follows.

        Only the new text (plus a partial end tag left from before) is scanned: the body
        is never re-joined or re-read while the block is open.
        """
        block = self._block
        assert block is not None
        window = block.unscanned + text
        end, scan = find_end_tag(window, block.scan)
        if end is None:
            cleared = window[: scan.position]
            block.pieces.append(cleared)
            resume = ScanState(0, scan.in_string, scan.escaped)  # relative to the new unscanned tail
            self._block = _OpenBlock(block.pieces, window[scan.position :], resume, block.reader)
            self._stream(block.reader, cleared, out)
            return None
        call = parse_call("".join(block.pieces) + window[:end])  # may raise: before anything is streamed
        self._stream(block.reader, window[:end], out)
        out.tool_calls.append(call)
        self._block = None
        return window[end + len(END_TAG) :]

    @staticmethod
    def _stream(reader: CallReader | None, body_text: str, out: DeltaMessage) -> None:
        if reader is not None and body_text and (progress := reader.feed(body_text)) is not None:
            out.tool_call_deltas.append(progress)

    def finish(self) -> DeltaMessage:
        if self._finished:
            raise RuntimeError("finish() was already called for this reply")
        if self._block is not None:  # a block left open: the batch rule decides
            block = self._block
            call = parse_call("".join(block.pieces) + block.unscanned)
            last = DeltaMessage(tool_calls=[call])
            self._stream(block.reader, block.unscanned, last)
            self._block, self._finished = None, True
            return last
        held, self.held_text, self._finished = self.held_text, "", True
        return DeltaMessage(content=held)
