"""The Responses API stream grammar (lab-07 tasks 1-3), as an acceptor that lists every rule a stream breaks.

Written from the API's documented event shapes and from what openai-python's
``ResponseStreamState`` relies on, never from the lab's solution::

    response.created  response.in_progress                       (task 3, numbering from 0)
    per item, output_index 0, 1, ...; one open at a time:
      output_item.added (empty item)                             (task 1: reasoning/message,
      [content_part.added  <kind>.delta*  <kind>.done  content_part.done]   task 2: function_call)
      [function_call_arguments.delta*  function_call_arguments.done]
      output_item.done (the whole item)
    response.completed | response.incomplete | response.failed   (task 3)

Each :class:`Violation` names the task whose code wrote the event, so a test grades one
task's rules only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mini_vllm.testing.trace import quote

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


def check_responses(events: list[Event], lifecycle: bool = True,
                    kept: list[dict[str, Any]] | None = None) -> list[Violation]:
    """Every rule of the Responses grammar the stream breaks. ``lifecycle=False``: items only (tasks 1-2).

    ``kept``: the items the formatter kept (its ``output``), read off it after the stream. Then the final
    response's output is checked against them (task 3 carries what was kept), and that they are the items as
    ``output_item.done`` sent them is task 1's rule (its ``close`` keeps them), so each task answers for its own.
    """
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
            _check_lifecycle(i, event, done_items if kept is None else kept, response_id, open_item, bad)
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
    if kept is not None and kept != done_items:
        bad(len(events), 1, "close() keeps every item it closes in output, exactly as output_item.done sent it "
            f"(kept: {len(kept)} items)", f"{len(done_items)} items as sent")
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
        bad(i, 3, "the final response's output is the list of items closed, as output_item.done sent them and "
            "output keeps them", f"{len(done_items)} items as sent")
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
                f"text {quote(shorten(item.parts[current]))}")
        item.text_done = True
    elif kind == "response.content_part.done":
        if not item.text_done:
            bad(i, task, f"the text is closed ({text_event}.done) before its part", f"{text_event}.done")
        part = event.get("part", {})
        if part.get("type") != PART_TYPES[item.kind] or part.get("text") != item.parts[current]:
            bad(i, task, "content_part.done carries the part with its whole text",
                f"part text {quote(shorten(item.parts[current]))}")
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
                f"arguments {quote(shorten(item.arguments))}")
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
                f"arguments {quote(shorten(item.arguments))}")
        return
    if item.part_open:
        bad(i, task, "every part is closed (content_part.done) before its item", "response.content_part.done")
    texts = [part.get("text") for part in done.get("content", [])] if isinstance(done.get("content"), list) else None
    if texts != item.parts or any(part.get("type") != PART_TYPES[item.kind] for part in done.get("content", [])):
        bad(i, task, "output_item.done carries the whole item: every part with its whole text",
            f"content texts {[shorten(t) for t in item.parts]}")


def shorten(text: str, width: int = 40) -> str:
    """``text``, or its two ends around an ellipsis when it is longer than ``width``."""
    return text if len(text) <= width else text[: width // 2] + "…" + text[-width // 2 :]
