"""Lab 07 starter: lab-02's StepOutput stream as typed events (OpenAI Responses, Anthropic Messages).

Fill in the tasks below (see README.md, "Your task"). Run the tests with:

    make lab-07

Given complete: ``EventFormatter`` (the order of a step's pieces, ``finish`` and ``fail``),
each formatter's ``__init__`` and ``response_object``. Each event is a plain dict, exactly
as it goes on the wire (the tests check every one against the official SDKs' types).
"""

from __future__ import annotations

from typing import Any

Event = dict[str, Any]

# Anthropic requires a signature on every thinking block (it proves the thought came
# from its servers when the block is sent back). A local server has nothing to prove:
# any opaque string will do, and clients only carry it along.
THINKING_SIGNATURE = "mini-vllm-local-thinking"
# How OpenAI's item ids begin, by item type.
ID_PREFIXES = {"reasoning": "rs", "message": "msg", "function_call": "fc"}


class EventFormatter:
    """The part both formatters share (given): a StepOutput's pieces in the order the model wrote them.

    A StepOutput does not say where its text sits among its tool-call deltas. The model's
    order can still be recovered: a thought always comes first; a call that was already
    open when the step began can only continue before any text (text cannot sit inside
    a call); a call that starts in this step starts after the text. So: the open call's
    fragments, the thought, the text, then the calls that start here.
    """

    def __init__(self) -> None:
        self.calls_started = 0  # calls whose name has arrived; the last of them may still be open

    def events(self, out: Any) -> list[Event]:
        """All the events one StepOutput adds (the end of the reply is ``finish``'s)."""
        deltas = [d for d in out.tool_call_deltas if d.name is not None or d.arguments_fragment]
        continuing = [d for d in deltas if d.index < self.calls_started]
        starting = [d for d in deltas if d.index >= self.calls_started]
        self.calls_started += sum(d.name is not None for d in starting)
        events: list[Event] = []
        for delta in continuing:
            events += self.call_delta(delta)
        if out.reasoning:
            events += self.reasoning_delta(out.reasoning)
        if out.text:
            events += self.text_delta(out.text)
        for delta in starting:
            events += self.call_delta(delta)
        return events

    def finish(self, finish_reason: str, output_tokens: int, stop_reason: str | None = None) -> list[Event]:
        """The last StepOutput's reason: close the open item, then end the reply."""
        status = "incomplete" if finish_reason == "length" else "completed"
        return [*self.close(status), *self.end(finish_reason, output_tokens, stop_reason)]

    def fail(self, message: str) -> list[Event]:
        """The reply broke (a malformed call): what was sent stays sent and is closed, then the error."""
        return [*self.close("incomplete"), *self.end_failed(message)]

    # Each formatter defines these (the lab's tasks).
    def start(self) -> list[Event]:
        raise NotImplementedError

    def reasoning_delta(self, text: str) -> list[Event]:
        raise NotImplementedError

    def text_delta(self, text: str) -> list[Event]:
        raise NotImplementedError

    def call_delta(self, delta: Any) -> list[Event]:
        raise NotImplementedError

    def close(self, status: str = "completed") -> list[Event]:
        raise NotImplementedError

    def end(self, finish_reason: str, output_tokens: int, stop_reason: str | None = None) -> list[Event]:
        raise NotImplementedError

    def end_failed(self, message: str) -> list[Event]:
        raise NotImplementedError


# ---------------------------------------------------------------- OpenAI Responses API


class ResponsesEventFormatter(EventFormatter):
    """StepOutputs -> OpenAI Responses API events (``response.created`` ... ``response.completed``)."""

    def __init__(self, response_id: str, model: str, created_at: int, input_tokens: int = 0) -> None:
        super().__init__()
        self.response_id, self.model, self.created_at, self.input_tokens = response_id, model, created_at, input_tokens
        self.output: list[dict[str, Any]] = []  # the items closed so far, as output_item.done sent them
        self.sequence_number = 0  # the next event's number
        # Add what else you need to remember: the open item, its text so far, ...

    def response_object(self, status: str, **fields: Any) -> dict[str, Any]:
        """The ``response`` body the lifecycle events carry. (Given.)"""
        return {"id": self.response_id, "object": "response", "created_at": self.created_at, "model": self.model,
                "status": status, "output": [dict(item) for item in self.output], "error": None,
                "incomplete_details": None, "parallel_tool_calls": True, "tool_choice": "auto", "tools": [],
                "usage": None, **fields}

    # ---- task 3: the lifecycle

    def start(self) -> list[Event]:
        """``response.created`` then ``response.in_progress``."""
        raise NotImplementedError("lab-07 task 3: implement ResponsesEventFormatter.start — see README, 'Your task'")

    def end(self, finish_reason: str, output_tokens: int, stop_reason: str | None = None) -> list[Event]:
        """Exactly one of ``response.completed`` / ``response.incomplete`` (max_tokens ran out)."""
        raise NotImplementedError("lab-07 task 3: implement ResponsesEventFormatter.end — see README, 'Your task'")

    def end_failed(self, message: str) -> list[Event]:
        """``response.failed``, the error inside the response."""
        raise NotImplementedError(
            "lab-07 task 3: implement ResponsesEventFormatter.end_failed — see README, 'Your task'")

    # ---- task 1: reasoning and message items

    def reasoning_delta(self, text: str) -> list[Event]:
        """More of the thought: open a reasoning item (and its reasoning_text part) if needed, then a delta."""
        raise NotImplementedError(
            "lab-07 task 1: implement ResponsesEventFormatter.reasoning_delta — see README, 'Your task'")

    def text_delta(self, text: str) -> list[Event]:
        """More of the answer: open a message item (and its output_text part) if needed, then a delta."""
        raise NotImplementedError(
            "lab-07 task 1: implement ResponsesEventFormatter.text_delta — see README, 'Your task'")

    def close(self, status: str = "completed") -> list[Event]:
        """Close the open item (if any): its text and part with the whole text, then the item itself.

        Closing a function_call item (its arguments' ``.done``) is task 2's part of this method.
        """
        raise NotImplementedError("lab-07 task 1: implement ResponsesEventFormatter.close — see README, 'Your task'")

    # ---- task 2: function_call items

    def call_delta(self, delta: Any) -> list[Event]:
        """A lab-01 ToolCallDelta: its name opens a function_call item; its fragment is an arguments delta."""
        raise NotImplementedError(
            "lab-07 task 2: implement ResponsesEventFormatter.call_delta — see README, 'Your task'")


# ---------------------------------------------------------------- Anthropic Messages API


class MessagesEventFormatter(EventFormatter):
    """StepOutputs -> Anthropic Messages API events (``message_start`` ... ``message_stop``)."""

    def __init__(self, message_id: str, model: str, input_tokens: int = 0, send_thinking: bool = False) -> None:
        super().__init__()
        self.message_id, self.model, self.input_tokens = message_id, model, input_tokens
        self.send_thinking = send_thinking  # send the thought as thinking blocks (the request's `thinking`)
        self.blocks_sent = 0  # content blocks opened so far: the next block's index
        # Add what else you need to remember: the open block, ...

    # ---- task 5: the lifecycle

    def start(self) -> list[Event]:
        """``message_start``: the message, still empty."""
        raise NotImplementedError("lab-07 task 5: implement MessagesEventFormatter.start — see README, 'Your task'")

    def end(self, finish_reason: str, output_tokens: int, stop_reason: str | None = None) -> list[Event]:
        """``message_delta`` with Anthropic's stop reason and the usage, then ``message_stop``."""
        raise NotImplementedError("lab-07 task 5: implement MessagesEventFormatter.end — see README, 'Your task'")

    def end_failed(self, message: str) -> list[Event]:
        """Anthropic reports a failure mid-stream as one ``error`` event, and nothing after it."""
        raise NotImplementedError(
            "lab-07 task 5: implement MessagesEventFormatter.end_failed — see README, 'Your task'")

    # ---- task 4: content blocks

    def reasoning_delta(self, text: str) -> list[Event]:
        """More of the thought: a thinking block's delta, but only when the request enabled thinking."""
        raise NotImplementedError(
            "lab-07 task 4: implement MessagesEventFormatter.reasoning_delta — see README, 'Your task'")

    def text_delta(self, text: str) -> list[Event]:
        """More of the answer: a text block's delta (opening the block if needed)."""
        raise NotImplementedError(
            "lab-07 task 4: implement MessagesEventFormatter.text_delta — see README, 'Your task'")

    def call_delta(self, delta: Any) -> list[Event]:
        """A lab-01 ToolCallDelta: its name opens a tool_use block; its fragment is an input_json_delta."""
        raise NotImplementedError(
            "lab-07 task 4: implement MessagesEventFormatter.call_delta — see README, 'Your task'")

    def close(self, status: str = "completed") -> list[Event]:
        """Close the open block (if any); a thinking block gets its signature first. (Anthropic has no status.)"""
        raise NotImplementedError("lab-07 task 4: implement MessagesEventFormatter.close — see README, 'Your task'")


# ---------------------------------------------------------------- task 6: whole responses


def build_response(events: list[Event]) -> dict[str, Any]:
    """The non-streamed Responses body: what the stream's last lifecycle event says."""
    raise NotImplementedError("lab-07 task 6: implement build_response — see README, 'Your task'")


def build_message(events: list[Event]) -> dict[str, Any]:
    """The non-streamed Messages body, put together from the events, as a client's accumulator does."""
    raise NotImplementedError("lab-07 task 6: implement build_message — see README, 'Your task'")
