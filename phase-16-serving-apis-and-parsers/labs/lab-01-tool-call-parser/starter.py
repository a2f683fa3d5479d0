"""Lab 01 starter: tool calls out of streamed model text (Hermes / Qwen format).

Fill in the tasks below (see README.md, "Your task"). The value types are given
complete. Run the tests with:

    make lab-01
"""

from __future__ import annotations

from mini_vllm.labtypes.lab01 import (  # given: the lab's value types
    FRESH_SCAN,
    DeltaMessage,
    ParsedOutput,
    ScanState,
    ToolCall,
    ToolCallDelta,
)


def parse_call(raw: str) -> ToolCall:
    """The call in one block's body, or ``ToolCallParseError(raw, reason)`` saying what is wrong.

    ``arguments_text`` is the slice of ``raw`` holding the arguments value, as written.
    A key written twice in one object is refused (``json.loads`` would quietly keep the last).
    """
    raise NotImplementedError("lab-01 task 1: implement parse_call — see README, 'Your task'")


def find_end_tag(body: str, state: ScanState = FRESH_SCAN) -> tuple[int | None, ScanState]:
    """Index of ``END_TAG`` in ``body`` outside JSON strings, resuming from ``state``.

    Returns ``(None, state)`` when the tag has not arrived yet; ``state`` then stops at
    a ``<`` that might be the start of the tag, so the next call looks at it again.
    """
    raise NotImplementedError("lab-01 task 2: implement find_end_tag — see README, 'Your task'")


def parse_tool_calls(text: str) -> ParsedOutput:
    """Split a whole reply into its prose and its tool calls (an open block at the end:
    accepted if its body is already a complete call, else an error)."""
    raise NotImplementedError("lab-01 task 3: implement parse_tool_calls — see README, 'Your task'")


class CallReader:
    """Follows one call's JSON body as it arrives and streams its arguments as written.

    ``feed(text)`` gets the next piece of the block's body (never the end tag) and returns
    a ``ToolCallDelta`` for call ``index``, or None when there is nothing new to send:
    the name once, as soon as its closing quote has arrived, then every character of the
    ``"arguments"`` value that ``text`` brought (hold nothing back). Arguments written
    before the name wait for it. Look at each character once, with a few named states;
    never raise (``parse_call`` judges the call at the end).
    """

    def __init__(self, index: int) -> None:
        raise NotImplementedError("lab-01 task 6: implement CallReader.__init__ — see README, 'Your task'")

    def feed(self, text: str) -> ToolCallDelta | None:
        """Read the next piece of the body; the call's progress, or None when there is nothing to send."""
        raise NotImplementedError("lab-01 task 6: implement CallReader.feed — see README, 'Your task'")


class StreamingToolParser:
    """``feed`` text deltas, ``finish`` at the end; each returns a ``DeltaMessage``.

    All contents together must equal ``parse_tool_calls(whole).content`` and all calls
    its ``tool_calls``, for every way of cutting the reply. Keep ``held_text`` (the prose
    you are holding back) up to date: the tests read it. A ``feed`` that meets a
    malformed call raises ``ToolCallParseError`` and must change nothing.
    With ``stream_arguments=True`` (task 6), hand each block's new body text to a
    ``CallReader`` and put its deltas in ``tool_call_deltas``; a reader cannot be rolled
    back, so let it read only once the whole delta is known to be good.
    """

    def __init__(self, stream_arguments: bool = False) -> None:
        raise NotImplementedError("lab-01 task 4: implement StreamingToolParser.__init__ — see README, 'Your task'")

    def feed(self, delta: str) -> DeltaMessage:
        raise NotImplementedError("lab-01 task 4: implement StreamingToolParser.feed — see README, 'Your task'")

    def finish(self) -> DeltaMessage:
        raise NotImplementedError("lab-01 task 5: implement StreamingToolParser.finish — see README, 'Your task'")
