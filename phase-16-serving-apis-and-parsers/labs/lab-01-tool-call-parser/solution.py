"""Lab 01 reference solution: tool calls out of streamed model text (Hermes / Qwen format).

In prose, hold only a suffix that could still become ``<tool_call>``; in a block, wait for
``</tool_call>`` outside JSON strings; stream each call's name once, then its arguments as
written. A malformed block raises with its raw text: a call never vanishes or leaks as prose.
"""

from __future__ import annotations

import json
from typing import Any

from mini_vllm.labtypes.lab01 import (  # given: the lab's value types
    END_TAG,
    FRESH_SCAN,
    START_TAG,
    DeltaMessage,
    ParsedOutput,
    ScanState,
    ToolCall,
    ToolCallDelta,
    ToolCallParseError,
)

_SPACE = " \t\n\r"  # JSON's whitespace


def find_end_tag(body: str, state: ScanState = FRESH_SCAN) -> tuple[int | None, ScanState]:
    """Index of ``END_TAG`` in ``body`` outside JSON strings, resuming from ``state``; or ``(None, state)``
    to resume from, stopped at a ``<`` that may start the tag, so the next call looks at it again."""
    position, in_string, escaped = state
    while position < len(body):
        char = body[position]
        if escaped:  # the character after a backslash is always part of the string
            escaped = False
        elif in_string:
            escaped, in_string = char == "\\", char != '"'
        elif char == '"':
            in_string = True
        elif char == "<":
            candidate = body[position : position + len(END_TAG)]
            if candidate == END_TAG:
                return position, ScanState(position, in_string, escaped)
            if END_TAG.startswith(candidate):
                break  # the body ends in what may be the start of the end tag: wait for more
        position += 1
    return None, ScanState(position, in_string, escaped)


def _refuse_repeated_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``json.loads`` would keep the last of two equal keys, while a stream has sent the first: refuse."""
    if len({key for key, _ in pairs}) < len(pairs):
        raise ValueError(f"a key is written twice in one object: {[key for key, _ in pairs]}")
    return dict(pairs)


def parse_call(raw: str) -> ToolCall:
    """The call in one block's body, or ``ToolCallParseError`` saying what is wrong with it."""
    try:
        payload = json.loads(raw, object_pairs_hook=_refuse_repeated_keys)
    except ValueError as error:  # not JSON (json.JSONDecodeError), or a repeated key
        raise ToolCallParseError(raw, f"not valid JSON for a call: {error}") from error
    if not isinstance(payload, dict):
        raise ToolCallParseError(raw, "the body must be a JSON object")
    if not isinstance(payload.get("name"), str) or not payload["name"]:
        raise ToolCallParseError(raw, 'the object needs a non-empty string "name"')
    if not isinstance(payload.get("arguments"), dict):
        raise ToolCallParseError(raw, '"arguments" must be a JSON object')
    return ToolCall(payload["name"], payload["arguments"], _arguments_text(raw))


def _arguments_text(raw: str) -> str:
    """The "arguments" value of ``raw`` (a valid envelope) as written: ``raw_decode`` parses one value
    at an index and says where it ended, so the envelope is walked key by key, nothing re-serialised."""
    def past_space(position: int) -> int:
        while raw[position] in _SPACE:
            position += 1
        return position

    decoder, position = json.JSONDecoder(), raw.index("{")
    while True:  # at the "{" or the "," before a key (the envelope is known to be valid)
        key, position = decoder.raw_decode(raw, past_space(position + 1))
        start = past_space(past_space(position) + 1)  # past the ":"
        _, position = decoder.raw_decode(raw, start)
        if key == "arguments":
            return raw[start:position]
        position = past_space(position)


def parse_tool_calls(text: str) -> ParsedOutput:
    """Split a whole reply into its prose and its tool calls (a block still open at the end
    is accepted when its body is already a complete call: the model stopped after the JSON)."""
    content, calls, rest = [], [], text
    while (start := rest.find(START_TAG)) != -1:
        content.append(rest[:start])
        body = rest[start + len(START_TAG) :]
        end, _ = find_end_tag(body)
        calls.append(parse_call(body if end is None else body[:end]))
        rest = "" if end is None else body[end + len(END_TAG) :]
    return ParsedOutput("".join([*content, rest]), calls)


class CallReader:
    """Follows one call's body character by character: a few named states say where in the envelope
    it is, and inside a value its nesting depth and string state. So it knows at once whether a
    character belongs to the arguments: nothing waits, nothing is taken back, nothing raises."""

    def __init__(self, index: int) -> None:
        self.index = index
        self.name: str | None = None
        self.held: list[str] = []  # arguments not sent yet: this feed's, or all while the name is unknown
        self._name_sent = False
        self._state = "start"  # start, key?, colon, value?, value, next or done: see _read
        self._owner, self._key = "", ""  # whose string or value is being read ("key", "name", ...); the last key
        self._raw: list[str] = []  # the characters of the key or the name being read, escapes and all
        self._depth, self._in_string, self._escaped = 0, False, False  # open "{"/"[", in a string, after "\\"

    def feed(self, text: str) -> ToolCallDelta | None:
        """Read the next piece of the body; the call's progress, or None when there is nothing to send."""
        self.held += [char for char in text if self._read(char)]  # each character once
        if self.name is None or (self._name_sent and not self.held):
            return None
        delta = ToolCallDelta(self.index, None if self._name_sent else self.name, "".join(self.held))
        self.held, self._name_sent = [], True
        return delta

    def _read(self, char: str) -> bool:
        """Move on by one character; True when it is part of the arguments value."""
        state = self._state
        if state == "value":
            self._in_value(char)
            return self._owner == "arguments"
        if state == "start" and char == "{":  # the envelope opens
            self._state = "key?"
        elif state == "key?" and char == '"':  # a key is read like a string value, owned by "key"
            self._owner, self._state, self._depth, self._in_string, self._raw = "key", "value", 0, True, []
        elif state == "colon" and char == ":":
            self._state = "value?"
        elif state == "value?" and char not in _SPACE:  # the value's first character says what it is
            self._owner = self._key if self._key in ("name", "arguments") else ""
            if char not in '"{[':  # a number, true, false or null: nothing inside to follow
                self._state = "next"
                return False  # (so "arguments": 12, not a call anyway, streams nothing)
            self._state, self._depth, self._in_string, self._raw = "value", int(char != '"'), char == '"', []
            return self._owner == "arguments"
        elif state == "next" and char in ",}":  # after a value: another key, or the end of the envelope
            self._state = "key?" if char == "," else "done"
        return False

    def _in_value(self, char: str) -> None:
        """One more character of a value: a string, object or array is over when its nesting closes."""
        if self._in_string:  # a quote ends it, unless a backslash came just before
            self._in_string = self._escaped or char != '"'
            self._escaped = not self._escaped and char == "\\"
            if self._in_string and self._depth == 0 and self._owner in ("key", "name"):
                self._raw.append(char)
        elif char == '"':
            self._in_string = True
        elif char in "{[":
            self._depth += 1
        elif char in "}]":
            self._depth -= 1
        if self._depth == 0 and not self._in_string:  # it just closed
            self._state = "colon" if self._owner == "key" else "next"
            if self._owner in ("key", "name"):
                try:  # the string's value, escapes decoded
                    text = str(json.loads('"' + "".join(self._raw) + '"'))
                except json.JSONDecodeError:
                    text = ""
                if self._owner == "key":
                    self._key = text
                else:
                    self.name = text or None  # an empty name never goes out


class StreamingToolParser:
    """``feed`` deltas, then ``finish``: together, what ``parse_tool_calls`` gives for the whole reply,
    however it is cut. A feed that meets a malformed call raises and changes nothing."""

    def __init__(self, stream_arguments: bool = False) -> None:
        self.stream_arguments = stream_arguments
        self.held_text = ""  # prose held back: it could still become "<tool_call>"
        self._calls_opened = 0
        self._finished = False
        # The open block: its body in pieces (joined once, at the end), a tail that may be a partial end tag.
        self._in_block = False
        self._pieces: list[str] = []
        self._unscanned, self._scan = "", FRESH_SCAN
        self._reader: CallReader | None = None

    def feed(self, delta: str) -> DeltaMessage:
        if not isinstance(delta, str):
            raise TypeError(f"feed() takes the next text delta as a str, got {type(delta).__name__}")
        if self._finished:
            raise RuntimeError("feed() after finish(): this reply is over")
        # A snapshot in O(1): every field is immutable but the open block's list of pieces, and a feed
        # appends to that only when it ends inside the block, so a feed that raises never has.
        saved = dict(vars(self))
        out = DeltaMessage()
        to_read: list[tuple[CallReader, str]] = []
        try:
            rest: str | None = delta
            while rest is not None:  # prose and blocks in turn, until the delta is used up
                rest = self._block_text(rest, out, to_read) if self._in_block else self._prose(rest, out)
        except ToolCallParseError:
            vars(self).update(saved)
            raise
        # A reader cannot be rolled back, so it reads only once every call closed in this delta has
        # passed parse_call: after a failed feed it would skip text that comes again (vLLM #22885's lost "}").
        for reader, body_text in to_read:
            if (progress := reader.feed(body_text)) is not None:
                out.tool_call_deltas.append(progress)
        return out

    def _prose(self, text: str, out: DeltaMessage) -> str | None:
        """Show prose up to a start tag (returning what follows it), or up to a possible partial tag."""
        window = self.held_text + text
        start = window.find(START_TAG)
        if start == -1:  # hold the longest suffix that is a proper prefix of the tag
            keep = next((n for n in range(min(len(START_TAG) - 1, len(window)), 0, -1)
                         if window.endswith(START_TAG[:n])), 0)
            out.content += window[: len(window) - keep]
            self.held_text = window[len(window) - keep :]
            return None
        out.content += window[:start]
        self.held_text, self._in_block, self._pieces, self._unscanned, self._scan = "", True, [], "", FRESH_SCAN
        self._reader = CallReader(self._calls_opened) if self.stream_arguments else None
        self._calls_opened += 1
        return window[start + len(START_TAG) :]

    def _block_text(self, text: str, out: DeltaMessage, to_read: list[tuple[CallReader, str]]) -> str | None:
        """Scan only the new text (never the whole body); at the end tag, parse the call, return the rest."""
        window = self._unscanned + text
        end, scan = find_end_tag(window, self._scan)
        if end is None:
            self._pieces.append(window[: scan.position])
            self._unscanned, self._scan = window[scan.position :], scan._replace(position=0)
        else:
            out.tool_calls.append(parse_call("".join(self._pieces) + window[:end]))
            self._in_block = False
        if self._reader is not None:  # the body up to where the scan stopped: the end tag, or a possible start of it
            to_read.append((self._reader, window[: scan.position]))
        return None if end is None else window[end + len(END_TAG) :]

    def finish(self) -> DeltaMessage:
        if self._finished:
            raise RuntimeError("finish() was already called for this reply")
        last = DeltaMessage()
        if self._in_block:  # a block left open: the batch rule decides. (Its reader has read it all: what is
            # unscanned starts with a "<" outside strings, and no valid call ends like that.)
            last.tool_calls.append(parse_call("".join(self._pieces) + self._unscanned))
        last.content, self.held_text = self.held_text, ""
        self._finished = True
        return last
