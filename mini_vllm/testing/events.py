"""Event-grammar acceptors for lab-07: what a Responses or Messages stream may say, event by event.

Written from the two APIs' documented shapes and from what the official SDKs'
accumulators (openai-python's ``ResponseStreamState``, anthropic-sdk-python's
``MessageStream``) rely on, never from the lab's solution. Each acceptor reads a whole
stream and returns every rule it breaks, as :class:`Violation` s; each violation names
the lab task whose code wrote the event, so a test grades one task's rules only.

Responses (tasks 1-3)::

    response.created  response.in_progress                       (task 3, numbering from 0)
    per item, output_index 0, 1, ...; one open at a time:
      output_item.added (empty item)                             (task 1: reasoning/message,
      [content_part.added  <kind>.delta*  <kind>.done  content_part.done]   task 2: function_call)
      [function_call_arguments.delta*  function_call_arguments.done]
      output_item.done (the whole item)
    response.completed | response.incomplete | response.failed   (task 3)

Messages (tasks 4-5)::

    message_start                                                (task 5)
    per block, index 0, 1, ...; one open at a time:              (task 4)
      content_block_start  content_block_delta*  [signature_delta]  content_block_stop
    message_delta (stop_reason, usage)  message_stop  |  error   (task 5)
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field
from typing import Any

from mini_vllm.testing.trace import FIRST_WRONG_STEP, quote

Event = dict[str, Any]
RESPONSES_TERMINAL = ("response.completed", "response.incomplete", "response.failed")
TEXT_EVENTS = {"message": "response.output_text", "reasoning": "response.reasoning_text"}
PART_TYPES = {"message": "output_text", "reasoning": "reasoning_text"}
ITEM_TASK = {"message": 1, "reasoning": 1, "function_call": 2}


@dataclass(frozen=True)
class Violation:
    index: int  # the event that broke the rule (len(events) when something is missing at the end)
    task: int  # the task whose code wrote that event
    rule: str  # the rule, in the lesson's words
    expected: str  # what the grammar allows there


@dataclass
class _Item:
    kind: str
    item_id: str
    output_index: int
    item: dict[str, Any]
    parts: list[str] = field(default_factory=list)  # each part's joined deltas
    part_open: bool = False
    text_done: bool = False  # the open part's <kind>.done has gone out
    arguments: str = ""
    arguments_done: bool = False


def check_responses(events: list[Event], lifecycle: bool = True) -> list[Violation]:
    """Every rule of the Responses grammar the stream breaks. ``lifecycle=False``: items only (tasks 1-2)."""
    found: list[Violation] = []
    items: list[_Item] = []  # every item announced, in order
    done_items: list[dict[str, Any]] = []  # as output_item.done sent them
    open_item: _Item | None = None
    ended = False
    response_id = None

    def bad(index: int, task: int, rule: str, expected: str) -> None:
        found.append(Violation(index, task, rule, expected))

    def owner(event: Event) -> int:
        """The task whose code wrote ``event``: the lifecycle's (3), or the kind of item it belongs to (1 or 2)."""
        kind = event.get("type", "")
        if kind in ("response.created", "response.in_progress", *RESPONSES_TERMINAL):
            return 3
        if kind in ("response.output_item.added", "response.output_item.done"):
            return ITEM_TASK.get(event.get("item", {}).get("type"), 1)
        named = next((item for item in reversed(items) if item.item_id == event.get("item_id")), open_item)
        return ITEM_TASK[named.kind] if named is not None else 1

    for i, event in enumerate(events):
        kind = event.get("type", "")
        task = owner(event)
        # ---- numbering: every event is the previous one plus one, the first is 0
        number = event.get("sequence_number")
        if lifecycle or i > 0:
            want = 0 if i == 0 else (events[i - 1].get("sequence_number", -2) + 1)
            if number != want:
                bad(i, 3 if i == 0 else task, "sequence_number counts up by one with no gaps, across the whole "
                    "response (never restarted per item)", f"sequence_number {want}")
        # ---- the lifecycle
        if ended:
            bad(i, 3, "nothing may follow the response's last event", "no more events")
            continue
        if lifecycle and i == 0 and kind != "response.created":
            bad(i, 3, "a Responses stream opens with response.created", "response.created")
        if lifecycle and i == 1 and kind != "response.in_progress":
            bad(i, 3, "response.in_progress follows response.created", "response.in_progress")
        if kind in ("response.created", "response.in_progress", *RESPONSES_TERMINAL):
            _check_lifecycle(i, event, done_items, response_id, open_item, bad)
            response_id = response_id or event.get("response", {}).get("id")
            ended = kind in RESPONSES_TERMINAL
            continue
        # ---- items
        if kind == "response.output_item.added":
            item = event.get("item", {})
            item_kind = item.get("type", "?")
            if open_item is not None:
                bad(i, task, f"one item at a time: output {open_item.output_index} must be closed "
                    "(response.output_item.done) before the next item opens",
                    f"response.output_item.done for output {open_item.output_index}")
            if event.get("output_index") != len(items):
                bad(i, task, "output_index numbers the items 0, 1, 2, ... in the order they open",
                    f"output_index {len(items)}")
            _check_new_item(i, task, item, items, bad)
            open_item = _Item(item_kind if item_kind in ITEM_TASK else "message", str(item.get("id")),
                              event.get("output_index", -1), item)
            items.append(open_item)
            continue
        if open_item is None or event.get("item_id", open_item.item_id) != open_item.item_id or \
                event.get("output_index") != open_item.output_index:
            here = "no item is open" if open_item is None else \
                f"the open item is {open_item.item_id} at output {open_item.output_index}"
            bad(i, task, f"every item event names the open item by item_id and output_index ({here})",
                "an event of the open item" if open_item else "response.output_item.added first")
            continue
        if kind == "response.output_item.done":
            _check_item_done(i, task, event.get("item", {}), open_item, bad)
            done_items.append(event.get("item", {}))
            open_item = None
            continue
        if open_item.kind == "function_call":
            _check_call_event(i, kind, event, open_item, bad)
        else:
            _check_part_event(i, kind, event, open_item, bad)
    if lifecycle and not ended:
        bad(len(events), 3, "the stream ends with response.completed, response.incomplete or response.failed",
            "a final lifecycle event")
    if not lifecycle and open_item is not None:
        bad(len(events), ITEM_TASK[open_item.kind], "close() closes the open item", "response.output_item.done")
    return found


def _check_lifecycle(i: int, event: Event, done_items: list[dict[str, Any]], response_id: str | None,
                     open_item: _Item | None, bad: Any) -> None:
    kind, response = event["type"], event.get("response", {})
    status = {"response.created": "in_progress", "response.in_progress": "in_progress",
              "response.completed": "completed", "response.incomplete": "incomplete", "response.failed": "failed"}[kind]
    if response.get("status") != status:
        bad(i, 3, f"the response inside {kind} has status {status!r}", f"status {status!r}")
    if response_id is not None and response.get("id") != response_id:
        bad(i, 3, "every lifecycle event carries the same response id", f"id {response_id!r}")
    if kind not in RESPONSES_TERMINAL:
        return
    if open_item is not None:
        bad(i, 3, "every item is closed before the response ends", f"response.output_item.done for output "
            f"{open_item.output_index}")
    if response.get("output") != done_items:
        bad(i, 3, "the final response's output is the list of items exactly as output_item.done sent them",
            f"{len(done_items)} items as sent")
    if kind == "response.incomplete" and (response.get("incomplete_details") or {}).get("reason") != \
            "max_output_tokens":
        bad(i, 3, "a reply cut by max tokens ends with incomplete_details.reason 'max_output_tokens'",
            "incomplete_details {'reason': 'max_output_tokens'}")
    if kind == "response.failed" and not (response.get("error") or {}).get("message"):
        bad(i, 3, "response.failed carries the error that ended the reply", "error {'code', 'message'}")
    if kind != "response.failed" and not isinstance(response.get("usage"), dict):
        bad(i, 3, "the final response reports its usage", "usage {input_tokens, output_tokens, ...}")


def _check_new_item(i: int, task: int, item: dict[str, Any], items: list[_Item], bad: Any) -> None:
    kind = item.get("type")
    shapes: dict[str, dict[str, Any]] = {"message": {"content": []}, "reasoning": {"summary": []},
                                         "function_call": {"arguments": ""}}
    if kind not in shapes:
        bad(i, task, "an output item is a 'reasoning', 'message' or 'function_call' item", "one of those types")
        return
    if item.get("status") != "in_progress" or any(item.get(k) != v for k, v in shapes[kind].items()):
        bad(i, task, f"a {kind} item is announced empty and in progress",
            f"status 'in_progress', {', '.join(f'{k} {v!r}' for k, v in shapes[kind].items())}")
    if not item.get("id") or any(other.item_id == item.get("id") for other in items):
        bad(i, task, "every item has its own id", "a new, non-empty id")
    if kind == "function_call" and not (item.get("name") and item.get("call_id")):
        bad(i, task, "a function_call item is announced with its name and call_id", "name and call_id")


def _check_part_event(i: int, kind: str, event: Event, item: _Item, bad: Any) -> None:
    task, text_event = ITEM_TASK[item.kind], TEXT_EVENTS[item.kind]
    index = event.get("content_index")
    current = len(item.parts) - 1
    if kind == "response.content_part.added":
        if item.part_open:
            bad(i, task, "one part at a time: the open part is closed before the next opens", "content_part.done")
        if index != len(item.parts):
            bad(i, task, "content_index is the part's index in its item (0 for the first part), never a count "
                "of deltas", f"content_index {len(item.parts)}")
        part = event.get("part", {})
        if part.get("type") != PART_TYPES[item.kind] or part.get("text") != "":
            bad(i, task, f"a {item.kind} item's part is an empty {PART_TYPES[item.kind]!r} part",
                f"part {{'type': {PART_TYPES[item.kind]!r}, 'text': ''}}")
        item.parts.append("")
        item.part_open, item.text_done = True, False
        return
    if kind in (f"{text_event}.delta", f"{text_event}.done", "response.content_part.done"):
        if not item.part_open:
            bad(i, task, f"{kind} belongs to an open part: no delta or .done after the part's .done",
                "content_part.added first" if not item.parts else "the next item")
            return
        if index != current:
            bad(i, task, "content_index is the part's index in its item (0 for the first part), never a count "
                "of deltas", f"content_index {current}")
    if kind == f"{text_event}.delta":
        if item.text_done:
            bad(i, task, f"no delta after its .done: {text_event}.done already closed this text", "content_part.done")
        if not event.get("delta"):
            bad(i, task, "a delta carries text (no empty deltas)", "a non-empty delta")
        item.parts[current] += event.get("delta", "")
    elif kind == f"{text_event}.done":
        if event.get("text") != item.parts[current]:
            bad(i, task, f"{kind} carries exactly the concatenation of its deltas",
                f"text {quote(_short(item.parts[current]))}")
        item.text_done = True
    elif kind == "response.content_part.done":
        if not item.text_done:
            bad(i, task, f"the text is closed ({text_event}.done) before its part", f"{text_event}.done")
        part = event.get("part", {})
        if part.get("type") != PART_TYPES[item.kind] or part.get("text") != item.parts[current]:
            bad(i, task, "content_part.done carries the part with its whole text",
                f"part text {quote(_short(item.parts[current]))}")
        item.part_open = False
    else:
        wrong = "thought text sent as answer text" if kind == "response.output_text.delta" else \
            "an event this item cannot have"
        bad(i, task, f"a {item.kind} item grows only by {text_event}.delta ({kind}: {wrong})", f"{text_event}.delta")


def _check_call_event(i: int, kind: str, event: Event, item: _Item, bad: Any) -> None:
    if kind == "response.function_call_arguments.delta":
        if item.arguments_done:
            bad(i, 2, "no delta after its .done: function_call_arguments.done already closed the arguments",
                "response.output_item.done")
        if not event.get("delta"):
            bad(i, 2, "a delta carries text (no empty deltas)", "a non-empty delta")
        item.arguments += event.get("delta", "")
    elif kind == "response.function_call_arguments.done":
        if event.get("arguments") != item.arguments:
            bad(i, 2, "function_call_arguments.done carries exactly the concatenation of its deltas",
                f"arguments {quote(_short(item.arguments))}")
        item.arguments_done = True
    else:
        what = "tool-call text sent as output text" if "output_text" in kind else "an event a call cannot have"
        bad(i, 2, f"a function_call item grows only by function_call_arguments.delta ({kind}: {what})",
            "response.function_call_arguments.delta")


def _check_item_done(i: int, task: int, done: dict[str, Any], item: _Item, bad: Any) -> None:
    if done.get("id") != item.item_id or done.get("type") != item.item.get("type"):
        bad(i, task, "output_item.done closes the open item (same id and type)", f"item {item.item_id}")
        return
    if done.get("status") not in ("completed", "incomplete"):
        bad(i, task, "a closed item's status is 'completed' (or 'incomplete' when the reply was cut)",
            "status 'completed'")
    if item.kind == "function_call":
        if not item.arguments_done:
            bad(i, task, "the arguments are closed (function_call_arguments.done) before the item",
                "response.function_call_arguments.done")
        expected = {**item.item, "arguments": item.arguments, "status": done.get("status")}
        if done != expected:
            bad(i, task, "output_item.done carries the whole call: the item as announced, with its arguments",
                f"arguments {quote(_short(item.arguments))}")
        return
    if item.part_open:
        bad(i, task, "every part is closed (content_part.done) before its item", "response.content_part.done")
    texts = [part.get("text") for part in done.get("content", [])] if isinstance(done.get("content"), list) else None
    if texts != item.parts or any(part.get("type") != PART_TYPES[item.kind] for part in done.get("content", [])):
        bad(i, task, "output_item.done carries the whole item: every part with its whole text",
            f"content texts {[_short(t) for t in item.parts]}")


# ---------------------------------------------------------------- Messages


@dataclass
class _Block:
    index: int
    type: str
    block: dict[str, Any]
    text: str = ""
    signed: bool = False


STOP_REASONS = {"length": "max_tokens", "tool_calls": "tool_use"}


def anthropic_stop_reason(finish_reason: str | None, stop_string: str | None) -> tuple[str, str | None]:
    """Lab-02's finish reason in Anthropic's words: (stop_reason, stop_sequence)."""
    if finish_reason in STOP_REASONS:
        return STOP_REASONS[finish_reason], None
    return ("stop_sequence", stop_string) if stop_string is not None else ("end_turn", None)


def check_messages(events: list[Event], lifecycle: bool = True,
                   stop: tuple[str, str | None] | None = None, output_tokens: int | None = None) -> list[Violation]:
    """Every rule of the Messages grammar the stream breaks; ``stop``: the (stop_reason, stop_sequence) due."""
    found: list[Violation] = []
    blocks: list[_Block] = []
    open_block: _Block | None = None
    unparsed: list[tuple[int, _Block]] = []  # tool_use blocks whose JSON does not parse
    state = "start" if lifecycle else "blocks"

    def bad(index: int, task: int, rule: str, expected: str) -> None:
        found.append(Violation(index, task, rule, expected))

    for i, event in enumerate(events):
        kind = event.get("type", "")
        if state == "start":
            if kind != "message_start":
                bad(i, 5, "a Messages stream opens with message_start", "message_start")
            else:
                message = event.get("message", {})
                if message.get("content") != [] or message.get("role") != "assistant" or message.get("stop_reason"):
                    bad(i, 5, "message_start carries the empty message: role 'assistant', content [], no "
                        "stop_reason yet", "an empty assistant message")
            state = "blocks"
            continue
        if state == "ended":
            bad(i, 5, "nothing may follow message_stop or an error", "no more events")
            continue
        if kind == "error":
            if not (event.get("error") or {}).get("message"):
                bad(i, 5, "an error event carries the error's type and message", "error {'type', 'message'}")
            state = "ended"
            continue
        if kind == "message_delta":
            if open_block is not None:
                bad(i, 4, "every block is closed (content_block_stop) before the message ends",
                    f"content_block_stop for block {open_block.index}")
                open_block = None
            delta, usage = event.get("delta", {}), event.get("usage", {})
            got = (delta.get("stop_reason"), delta.get("stop_sequence"))
            if stop is not None and got != stop:
                bad(i, 5, "message_delta says why the reply ended: end_turn, max_tokens, tool_use, or "
                    "stop_sequence with the stop string that matched", f"stop_reason {stop[0]!r}, "
                    f"stop_sequence {stop[1]!r}")
            if output_tokens is not None and usage.get("output_tokens") != output_tokens:
                bad(i, 5, "message_delta reports the output tokens", f"usage.output_tokens {output_tokens}")
            if got[0] != "max_tokens":
                for at, block in unparsed:
                    bad(at, 4, "a tool_use block's partial_json fragments join to a JSON object (the model's "
                        "arguments text, exactly as written)", f"fragments of a JSON object, not "
                        f"{quote(_short(block.text))}")
            state = "delta"
            continue
        if kind == "message_stop":
            if state != "delta":
                bad(i, 5, "message_stop follows message_delta", "message_delta")
            state = "ended"
            continue
        if state == "delta":
            bad(i, 5, "after message_delta only message_stop may come", "message_stop")
            continue
        index = event.get("index")
        if kind == "content_block_start":
            if open_block is not None:
                what = "a thinking block left open" if open_block.type == "thinking" else "one block at a time"
                bad(i, 4, f"{what}: block {open_block.index} must be closed (content_block_stop) before the "
                    "next opens", f"content_block_stop for block {open_block.index}")
            if index != len(blocks):
                bad(i, 4, "block indexes count the blocks sent: 0, 1, 2, ...", f"index {len(blocks)}")
            block = event.get("content_block", {})
            _check_new_block(i, block, blocks, bad)
            open_block = _Block(len(blocks), block.get("type", "?"), block)
            blocks.append(open_block)
            continue
        if open_block is None or index != open_block.index:
            bad(i, 4, f"{kind} belongs to the open block" + ("" if open_block else " (none is open)"),
                f"index {open_block.index}" if open_block else "content_block_start first")
            continue
        if kind == "content_block_delta":
            _check_block_delta(i, event.get("delta", {}), open_block, bad)
        elif kind == "content_block_stop":
            if open_block.type == "thinking" and not open_block.signed:
                bad(i, 4, "a thinking block carries a signature: a signature_delta comes before its "
                    "content_block_stop", "content_block_delta with a signature_delta")
            if open_block.type == "tool_use" and not _is_json_object(open_block.text or "{}"):
                unparsed.append((i, open_block))  # fine only if max_tokens cut the call short
            open_block = None
        else:
            bad(i, 4, f"{kind} is not a Messages stream event", "content_block_delta or content_block_stop")
    if lifecycle and state != "ended":
        bad(len(events), 5, "the stream ends with message_delta then message_stop (or an error)", "message_stop")
    if not lifecycle and open_block is not None:
        bad(len(events), 4, "close() closes the open block" + (" (a thinking block left open)" if open_block.type ==
            "thinking" else ""), f"content_block_stop for block {open_block.index}")
    return found


def _is_json_object(text: str) -> bool:
    try:
        return isinstance(json.loads(text), dict)
    except json.JSONDecodeError:
        return False


def _check_new_block(i: int, block: dict[str, Any], blocks: list[_Block], bad: Any) -> None:
    shapes: dict[str, dict[str, Any]] = {"text": {"text": ""}, "thinking": {"thinking": "", "signature": ""},
                                         "tool_use": {"input": {}}}
    kind = block.get("type")
    if kind not in shapes:
        bad(i, 4, "a content block is 'thinking', 'text' or 'tool_use'", "one of those types")
        return
    if any(block.get(k) != v for k, v in shapes[kind].items()):
        bad(i, 4, f"a {kind} block starts empty", ", ".join(f"{k} {v!r}" for k, v in shapes[kind].items()))
    if kind == "tool_use":
        if not (block.get("id") and block.get("name")):
            bad(i, 4, "a tool_use block starts with its id and name", "id and name")
        if any(b.block.get("id") == block.get("id") for b in blocks):
            bad(i, 4, "every tool_use block has its own id", "a new id")


def _check_block_delta(i: int, delta: dict[str, Any], block: _Block, bad: Any) -> None:
    allowed = {"text": "text_delta", "thinking": "thinking_delta", "tool_use": "input_json_delta"}[block.type] \
        if block.type in ("text", "thinking", "tool_use") else "?"
    kind = delta.get("type")
    if block.type == "thinking" and kind == "signature_delta":
        if not delta.get("signature"):
            bad(i, 4, "a signature_delta carries a signature", "a non-empty signature")
        block.signed = True
        return
    if kind != allowed:
        what = {"text": "tool-call or thought text sent as text" if kind == "text_delta" else ""}.get(block.type, "")
        bad(i, 4, f"a {block.type} block grows only by {allowed}" + (f" ({what})" if what else ""), allowed)
        return
    if block.signed:
        bad(i, 4, "the signature closes a thinking block: no thinking_delta after it", "content_block_stop")
    piece = delta.get({"text_delta": "text", "thinking_delta": "thinking", "input_json_delta": "partial_json"}[kind])
    if not isinstance(piece, str) or not piece:
        bad(i, 4, "a delta carries text (no empty deltas)", "a non-empty delta")
        return
    block.text += piece


# ---------------------------------------------------------------- what a stream says, and how to show it


@dataclass
class Channels:
    """A stream's content, accumulated from its deltas: what a client ends up with."""

    reasoning: str = ""
    text: str = ""
    calls: list[tuple[str, str]] = field(default_factory=list)  # (name, arguments text)


def responses_channels(events: list[Event]) -> Channels:
    out = Channels()
    calls: dict[str, list[str]] = {}
    for event in events:
        kind = event.get("type")
        if kind == "response.output_text.delta":
            out.text += event["delta"]
        elif kind == "response.reasoning_text.delta":
            out.reasoning += event["delta"]
        elif kind == "response.output_item.added" and event["item"].get("type") == "function_call":
            calls[event["item"]["id"]] = [event["item"].get("name", ""), ""]
        elif kind == "response.function_call_arguments.delta" and event.get("item_id") in calls:
            calls[event["item_id"]][1] += event["delta"]
    out.calls = [(name, arguments) for name, arguments in calls.values()]
    return out


def messages_channels(events: list[Event]) -> Channels:
    out = Channels()
    types: dict[int, str] = {}
    calls: dict[int, list[str]] = {}
    for event in events:
        kind = event.get("type")
        if kind == "content_block_start":
            types[event["index"]] = event["content_block"].get("type", "")
            if types[event["index"]] == "tool_use":
                calls[event["index"]] = [event["content_block"].get("name", ""), ""]
        elif kind == "content_block_delta":
            delta = event["delta"]
            if delta.get("type") == "text_delta":
                out.text += delta.get("text", "")
            elif delta.get("type") == "thinking_delta":
                out.reasoning += delta.get("thinking", "")
            elif delta.get("type") == "input_json_delta" and event["index"] in calls:
                calls[event["index"]][1] += delta.get("partial_json", "")
    out.calls = [(name, arguments) for name, arguments in calls.values()]
    return out


def _short(text: str, width: int = 40) -> str:
    return text if len(text) <= width else text[: width // 2] + "…" + text[-width // 2 :]


def _indices(event: Event) -> str:
    keys = (("output_index", "out"), ("content_index", "part"), ("index", "block"))
    return " ".join(f"{label}={event[key]}" for key, label in keys if key in event)


def _payload(event: Event) -> str:
    for key in ("delta", "text", "arguments"):
        value = event.get(key)
        if isinstance(value, str):
            return quote(_short(value))
        if isinstance(value, dict) and "type" in value:
            inner = next((v for k, v in value.items() if k != "type"), "")
            return f"{value['type']} {quote(_short(str(inner)))}"
        if isinstance(value, dict):
            return _short(json.dumps(value, ensure_ascii=False), 42)
    for key in ("item", "content_block", "part"):
        if isinstance(event.get(key), dict):
            shown = {k: v for k, v in event[key].items() if k in ("type", "id", "name", "text", "status")}
            return _short(json.dumps(shown, ensure_ascii=False), 42)
    if isinstance(event.get("response"), dict):
        return f"status {event['response'].get('status')!r}"
    return ""


def event_table(events: list[Event], violation: Violation, step_of: list[int] | None = None,
                context: int = 6) -> str:
    """The violated rule, then the stream as a table around the first wrong event, marked.

    The "expected" column comes from the grammar acceptor (this module), never from the
    code under test.
    """
    start = max(0, violation.index - context)
    stop = min(len(events), violation.index + context + 1)
    lines = [violation.rule,
             f"{'#':>4}  {'step':>4}  {'seq':>4}  {'event':<40} {'indices':<18} {'payload':<42} expected"]
    if start > 0:
        lines.append(f"{'…':>4}  ({start} earlier events were fine)")
    for i in range(start, stop):
        event = events[i]
        step = str(step_of[i]) if step_of and i < len(step_of) else ""
        seq = str(event.get("sequence_number", ""))
        mark = f"{violation.expected}  <-- first wrong event" if i == violation.index else ""
        lines.append(f"{i:>4}  {step:>4}  {seq:>4}  {event.get('type', '?'):<40} {_indices(event):<18} "
                     f"{_payload(event):<42} {mark}")
    if violation.index >= len(events):
        lines.append(f"{len(events):>4}  {'':>4}  {'':>4}  {'(end of stream)':<40} {'':<18} {'':<42} "
                     f"{violation.expected}  <-- first wrong event")
    elif stop < len(events):
        lines.append(f"{'…':>4}  ({len(events) - stop} more events)")
    what = events[violation.index].get("type", "?") if violation.index < len(events) else "the end of the stream"
    lines.append(f"{FIRST_WRONG_STEP} event {violation.index} ({what}): expected {violation.expected}")
    return "\n".join(lines)


# ---------------------------------------------------------------- the official SDKs' types


def _extra_fields(model: Any, path: str = "") -> list[str]:
    """Fields the SDK type does not define (its models accept them silently): a misspelled key shows here."""
    from pydantic import BaseModel

    if isinstance(model, list):
        return [found for i, value in enumerate(model) for found in _extra_fields(value, f"{path}[{i}]")]
    if not isinstance(model, BaseModel):
        return []
    found = [f"{path}.{key}".lstrip(".") for key in (model.model_extra or {})]
    for name in type(model).model_fields:
        found += _extra_fields(getattr(model, name), f"{path}.{name}")
    return found


@functools.cache
def _adapter(api: str) -> Any:
    from pydantic import TypeAdapter

    if api == "responses":
        from openai.types.responses import ResponseStreamEvent

        return TypeAdapter(ResponseStreamEvent)
    from anthropic.types import ErrorResponse, RawMessageStreamEvent

    return TypeAdapter(RawMessageStreamEvent | ErrorResponse)


def sdk_problem(api: str, event: Event) -> str | None:
    """Why the official SDK's type (``openai.types.responses.ResponseStreamEvent`` for ``"responses"``,
    ``anthropic.types.RawMessageStreamEvent`` or ``ErrorResponse`` for ``"messages"``) rejects
    ``event``, or None when it is exactly one of them."""
    from pydantic import ValidationError

    try:
        model = _adapter(api).validate_python(event)
    except ValidationError as error:
        first = error.errors()[0]
        return f"{'.'.join(map(str, first['loc']))}: {first['msg']} ({error.error_count()} problems)"
    extra = _extra_fields(model)
    return f"fields the SDK's type does not have: {extra}" if extra else None
