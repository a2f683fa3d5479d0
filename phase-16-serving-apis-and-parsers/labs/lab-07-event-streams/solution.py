"""Lab 07 reference solution: lab-02's StepOutput stream as typed events.

Two newer wire protocols send a reply as a small grammar of typed events rather than
bare deltas. Both say the same four things, in their own words:

1. an item (OpenAI Responses) or a content block (Anthropic Messages) is announced;
2. it grows by deltas;
3. it is closed, carrying its whole text;
4. the next one opens; after the last one, the reply ends with its reason.

The pipeline of lab-02 already separates the channels (thought, answer, tool call);
this lab only frames them. Each formatter is a state machine with one open item at a
time: a piece of a different kind closes the open item and opens the next.
"""

from __future__ import annotations

from typing import Any

import jiter

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
        self._item: dict[str, Any] | None = None  # the open item, as it will be when it closes
        # The open item's text (or arguments), delta by delta, joined once when it closes: adding each
        # delta to one string would copy the whole item so far on every delta (cost growing with the item).
        self._parts: list[str] = []

    def response_object(self, status: str, **fields: Any) -> dict[str, Any]:
        """The ``response`` body the lifecycle events carry. (Given.)"""
        return {"id": self.response_id, "object": "response", "created_at": self.created_at, "model": self.model,
                "status": status, "output": [dict(item) for item in self.output], "error": None,
                "incomplete_details": None, "parallel_tool_calls": True, "tool_choice": "auto", "tools": [],
                "usage": None, **fields}

    def _emit(self, type: str, **fields: Any) -> Event:
        event = {"type": type, "sequence_number": self.sequence_number, **fields}
        self.sequence_number += 1
        return event

    # ---- task 3: the lifecycle

    def start(self) -> list[Event]:
        """``response.created`` then ``response.in_progress``."""
        return [self._emit("response.created", response=self.response_object("in_progress")),
                self._emit("response.in_progress", response=self.response_object("in_progress"))]

    def end(self, finish_reason: str, output_tokens: int, stop_reason: str | None = None) -> list[Event]:
        """Exactly one of ``response.completed`` / ``response.incomplete`` (max_tokens ran out)."""
        usage = {"input_tokens": self.input_tokens,
                 "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
                 "output_tokens": output_tokens, "output_tokens_details": {"reasoning_tokens": 0},
                 "total_tokens": self.input_tokens + output_tokens}
        if finish_reason == "length":
            response = self.response_object("incomplete", usage=usage,
                                            incomplete_details={"reason": "max_output_tokens"})
            return [self._emit("response.incomplete", response=response)]
        return [self._emit("response.completed", response=self.response_object("completed", usage=usage))]

    def end_failed(self, message: str) -> list[Event]:
        """``response.failed``, the error inside the response."""
        error = {"code": "server_error", "message": message}
        return [self._emit("response.failed", response=self.response_object("failed", error=error))]

    # ---- task 1: reasoning and message items

    def reasoning_delta(self, text: str) -> list[Event]:
        events = self._open("reasoning")
        item = self._item
        assert item is not None
        self._parts.append(text)
        return [*events, self._emit("response.reasoning_text.delta", item_id=item["id"],
                                    output_index=len(self.output), content_index=0, delta=text)]

    def text_delta(self, text: str) -> list[Event]:
        events = self._open("message")
        item = self._item
        assert item is not None
        self._parts.append(text)
        return [*events, self._emit("response.output_text.delta", item_id=item["id"], output_index=len(self.output),
                                    content_index=0, delta=text, logprobs=[])]

    def _open(self, kind: str, name: str = "") -> list[Event]:
        """Make an item of ``kind`` the open one: close another kind, announce the new one (empty)."""
        if self._item is not None and self._item["type"] == kind and kind != "function_call":
            return []
        events = self.close()
        index = len(self.output)
        item_id = f"{ID_PREFIXES[kind]}_{self.response_id}_{index}"
        self._parts = []
        if kind == "reasoning":
            self._item = {"id": item_id, "type": "reasoning", "summary": [], "content": [], "status": "in_progress"}
        elif kind == "message":
            self._item = {"id": item_id, "type": "message", "role": "assistant", "status": "in_progress",
                          "content": []}
        else:
            self._item = {"id": item_id, "type": "function_call", "call_id": f"call_{self.response_id}_{index}",
                          "name": name, "arguments": "", "status": "in_progress"}
        events.append(self._emit("response.output_item.added", output_index=index, item=dict(self._item)))
        if kind != "function_call":  # a thought or a message holds one text part, index 0
            events.append(self._emit("response.content_part.added", item_id=item_id, output_index=index,
                                     content_index=0, part=self._part(kind, "")))
        return events

    @staticmethod
    def _part(kind: str, text: str) -> dict[str, Any]:
        if kind == "reasoning":
            return {"type": "reasoning_text", "text": text}
        return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}

    def close(self, status: str = "completed") -> list[Event]:
        """Close the open item (if any): its part with the whole text, then the item itself."""
        item = self._item
        if item is None:
            return []
        self._item = None
        index, item_id, kind, whole = len(self.output), item["id"], item["type"], "".join(self._parts)
        ids = {"item_id": item_id, "output_index": index}
        if kind == "function_call":  # task 2
            events = [self._emit("response.function_call_arguments.done", **ids, arguments=whole)]
            done = {**item, "arguments": whole, "status": status}
        else:
            if kind == "reasoning":
                text_done = self._emit("response.reasoning_text.done", **ids, content_index=0, text=whole)
            else:
                text_done = self._emit("response.output_text.done", **ids, content_index=0, text=whole, logprobs=[])
            part = self._part(kind, whole)
            events = [text_done, self._emit("response.content_part.done", **ids, content_index=0, part=part)]
            done = {**item, "content": [part], "status": status}
        events.append(self._emit("response.output_item.done", output_index=index, item=done))
        self.output.append(done)
        return events

    # ---- task 2: function_call items

    def call_delta(self, delta: Any) -> list[Event]:
        events = self._open("function_call", delta.name) if delta.name is not None else []
        item = self._item
        if item is None or item["type"] != "function_call":
            raise ValueError(f"arguments for call {delta.index} arrived before its name")
        if delta.arguments_fragment:
            self._parts.append(delta.arguments_fragment)
            events.append(self._emit("response.function_call_arguments.delta", item_id=item["id"],
                                     output_index=len(self.output), delta=delta.arguments_fragment))
        return events


# ---------------------------------------------------------------- Anthropic Messages API


class MessagesEventFormatter(EventFormatter):
    """StepOutputs -> Anthropic Messages API events (``message_start`` ... ``message_stop``)."""

    def __init__(self, message_id: str, model: str, input_tokens: int = 0, send_thinking: bool = False) -> None:
        super().__init__()
        self.message_id, self.model, self.input_tokens = message_id, model, input_tokens
        self.send_thinking = send_thinking  # send the thought as thinking blocks (the request's `thinking`)
        self.blocks_sent = 0  # content blocks opened so far: the next block's index
        self._open_type: str | None = None  # the type of the open block, if one is open

    # ---- task 5: the lifecycle

    def start(self) -> list[Event]:
        """``message_start``: the message, still empty."""
        message: dict[str, Any] = {"id": self.message_id, "type": "message", "role": "assistant", "model": self.model,
                   "content": [], "stop_reason": None, "stop_sequence": None,
                   "usage": {"input_tokens": self.input_tokens, "output_tokens": 0}}
        return [{"type": "message_start", "message": message}]

    def end(self, finish_reason: str, output_tokens: int, stop_reason: str | None = None) -> list[Event]:
        """``message_delta`` with Anthropic's stop reason and the usage, then ``message_stop``."""
        if finish_reason == "length":
            reason, sequence = "max_tokens", None
        elif finish_reason == "tool_calls":
            reason, sequence = "tool_use", None
        elif stop_reason is not None:
            reason, sequence = "stop_sequence", stop_reason
        else:
            reason, sequence = "end_turn", None
        delta = {"type": "message_delta", "delta": {"stop_reason": reason, "stop_sequence": sequence},
                 "usage": {"output_tokens": output_tokens}}
        return [delta, {"type": "message_stop"}]

    def end_failed(self, message: str) -> list[Event]:
        """Anthropic reports a failure mid-stream as one ``error`` event, and nothing after it."""
        return [{"type": "error", "error": {"type": "api_error", "message": message}}]

    # ---- task 4: content blocks

    def reasoning_delta(self, text: str) -> list[Event]:
        if not self.send_thinking:  # parsed out of the answer all the same, but not sent
            return []
        return [*self._open("thinking"), self._delta({"type": "thinking_delta", "thinking": text})]

    def text_delta(self, text: str) -> list[Event]:
        return [*self._open("text"), self._delta({"type": "text_delta", "text": text})]

    def call_delta(self, delta: Any) -> list[Event]:
        events = self._open("tool_use", delta.name, delta.index) if delta.name is not None else []
        if self._open_type != "tool_use":
            raise ValueError(f"arguments for call {delta.index} arrived before its name")
        if delta.arguments_fragment:  # the model's own text, never re-serialised
            events.append(self._delta({"type": "input_json_delta", "partial_json": delta.arguments_fragment}))
        return events

    def _open(self, block_type: str, name: str = "", call_index: int = 0) -> list[Event]:
        if self._open_type == block_type and block_type != "tool_use":
            return []
        events = self.close()
        block: dict[str, Any]
        if block_type == "thinking":
            block = {"type": "thinking", "thinking": "", "signature": ""}
        elif block_type == "text":
            block = {"type": "text", "text": ""}
        else:
            block = {"type": "tool_use", "id": f"toolu_{self.message_id}_{call_index}", "name": name, "input": {}}
        self._open_type = block_type
        events.append({"type": "content_block_start", "index": self.blocks_sent, "content_block": block})
        return events

    def _delta(self, delta: dict[str, Any]) -> Event:
        return {"type": "content_block_delta", "index": self.blocks_sent, "delta": delta}

    def close(self, status: str = "completed") -> list[Event]:
        """Close the open block (if any); a thinking block gets its signature first. (Anthropic has no status.)"""
        if self._open_type is None:
            return []
        events = []
        if self._open_type == "thinking":
            events.append(self._delta({"type": "signature_delta", "signature": THINKING_SIGNATURE}))
        events.append({"type": "content_block_stop", "index": self.blocks_sent})
        self._open_type = None
        self.blocks_sent += 1
        return events


# ---------------------------------------------------------------- task 6: whole responses


def build_response(events: list[Event]) -> dict[str, Any]:
    """The non-streamed Responses body: what the stream's last lifecycle event says."""
    for event in reversed(events):
        if event["type"] in ("response.completed", "response.incomplete", "response.failed"):
            return dict(event["response"])
    raise ValueError("the events hold no response.completed, response.incomplete or response.failed")


def build_message(events: list[Event]) -> dict[str, Any]:
    """The non-streamed Messages body, put together from the events, as a client's accumulator does."""
    message: dict[str, Any] | None = None
    partial_json: dict[int, str] = {}
    for event in events:
        kind = event["type"]
        if kind == "error":
            raise ValueError(f"the stream ended with an error: {event['error']['message']}")
        if kind == "message_start":
            message = {**event["message"], "content": [], "usage": dict(event["message"]["usage"])}
            continue
        if message is None:
            raise ValueError(f"{kind} before message_start")
        if kind == "content_block_start":
            message["content"].append(dict(event["content_block"]))
        elif kind == "content_block_delta":
            block, delta = message["content"][event["index"]], event["delta"]
            if delta["type"] == "text_delta":
                block["text"] += delta["text"]
            elif delta["type"] == "thinking_delta":
                block["thinking"] += delta["thinking"]
            elif delta["type"] == "signature_delta":
                block["signature"] = delta["signature"]
            elif delta["type"] == "input_json_delta":
                partial_json[event["index"]] = partial_json.get(event["index"], "") + delta["partial_json"]
        elif kind == "content_block_stop" and partial_json.get(event["index"]):
            # Parsed as the SDK parses it: max_tokens may have cut the call mid-arguments, and the SDK keeps
            # what is complete (a cut string or key is left out) instead of failing.
            message["content"][event["index"]]["input"] = jiter.from_json(
                partial_json[event["index"]].encode(), partial_mode=True)
        elif kind == "message_delta":
            message.update(event["delta"])
            message["usage"]["output_tokens"] = event["usage"]["output_tokens"]
    if message is None:
        raise ValueError("the events hold no message_start")
    return message
