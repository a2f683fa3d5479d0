"""Lab-07's test kit, one door: the two stream grammars, what a stream says, and how a failure shows it.

- :func:`check_responses` / :func:`check_messages` (``responses_grammar``, ``messages_grammar``):
  every rule a stream breaks, each naming the task whose code wrote the event;
- :func:`responses_channels` / :func:`messages_channels`: what a client ends up with;
- :func:`event_table`: the stream around the first wrong event, for a failure message;
- :func:`sdk_problem`: whether the official SDK's pydantic type is exactly the event.
"""

from __future__ import annotations

import difflib
import functools
import json
import types
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pydantic import BaseModel

from mini_vllm.testing.messages_grammar import anthropic_stop_reason, check_messages
from mini_vllm.testing.responses_grammar import Event, Violation, check_responses, shorten
from mini_vllm.testing.trace import FIRST_WRONG_STEP, quote

__all__ = ["Channels", "Violation", "anthropic_stop_reason", "check_messages", "check_responses", "event_table",
           "messages_channels", "responses_channels", "sdk_classes", "sdk_problem"]


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


def _indices(event: Event) -> str:
    keys = (("output_index", "out"), ("content_index", "part"), ("index", "block"))
    return " ".join(f"{label}={event[key]}" for key, label in keys if key in event)


def _payload(event: Event) -> str:
    for key in ("delta", "text", "arguments"):
        value = event.get(key)
        if isinstance(value, str):
            return quote(shorten(value))
        if isinstance(value, dict) and "type" in value:
            inner = next((v for k, v in value.items() if k != "type"), "")
            return f"{value['type']} {quote(shorten(str(inner)))}"
        if isinstance(value, dict):
            return shorten(json.dumps(value, ensure_ascii=False), 42)
    for key in ("item", "content_block", "part"):
        if isinstance(event.get(key), dict):
            shown = {k: v for k, v in event[key].items() if k in ("type", "id", "name", "text", "status")}
            return shorten(json.dumps(shown, ensure_ascii=False), 42)
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


def _members(union: Any) -> list[Any]:
    """The classes of a (possibly ``Annotated``) union of SDK models, flattened."""
    import typing

    if typing.get_origin(union) is typing.Annotated:
        union = typing.get_args(union)[0]
    if typing.get_origin(union) in (typing.Union, types.UnionType):
        return [member for arg in typing.get_args(union) for member in _members(arg)]
    return [union]


@functools.cache
def sdk_classes(api: str) -> dict[str, type[BaseModel]]:
    """The official SDK's event class for each event ``type`` (``"responses"``: ``openai.types.responses``;
    ``"messages"``: ``anthropic.types``, with ``ErrorResponse`` for the ``error`` event)."""
    import typing

    if api == "responses":
        from openai.types.responses import ResponseStreamEvent

        union: Any = ResponseStreamEvent
    else:
        from anthropic.types import ErrorResponse, RawMessageStreamEvent

        union = RawMessageStreamEvent | ErrorResponse
    classes = {}
    for member in _members(union):
        (kind,) = typing.get_args(member.model_fields["type"].annotation)
        classes[kind] = member
    return classes


def _is_member(key: Any) -> bool:
    """Pydantic names the union member it tried by its class name (``ResponseOutputText``) in an error's loc."""
    return isinstance(key, str) and key[:1].isupper() and "_" not in key and "." not in key


def _where(loc: tuple[Any, ...], name_members: bool = True) -> str:
    """A pydantic error location as a field path: ``part.annotations``, list positions as ``[0]``, and the
    union member pydantic tried after its field (``part (ResponseOutputText).annotations``)."""
    path = ""
    for key in loc:
        if isinstance(key, int):
            path += f"[{key}]"
        elif _is_member(key):
            path += f" ({key})" if name_members else ""
        else:
            path += f".{key}" if path else str(key)
    return path or "(the event itself)"


def _real_errors(errors: list[Any]) -> list[tuple[Any, bool]]:
    """Pydantic reports every member of a union it tried. Keep the member whose ``type`` is the one the
    value names (drop a member whose ``type`` literal did not match), one error per field, each with
    whether a single member reported it (then naming that member helps; otherwise it misleads)."""
    wrong_members = {tuple(e["loc"][:-1]) for e in errors if tuple(e["loc"][-1:]) == ("type",)
                     and e["type"] == "literal_error" and len(e["loc"]) > 1 and _is_member(e["loc"][-2])}
    by_field: dict[tuple[Any, ...], list[Any]] = {}
    for error in errors:
        loc = tuple(error["loc"])
        if not any(loc[: len(member)] == member for member in wrong_members):
            by_field.setdefault(tuple(k for k in loc if not _is_member(k)), []).append(error)
    if not by_field:
        return [(error, True) for error in errors]
    return [(found[0], len(found) == 1) for found in by_field.values()]


def sdk_problem(api: str, event: Event) -> str | None:
    """Why the official SDK's class for this event's own ``type`` rejects ``event``, or None when the
    event is exactly that class (no field missing, wrong or unknown).

    The answer opens with the event type and the SDK class, then names the field:
    ``response.output_text.delta must be exactly openai's ResponseTextDeltaEvent: logprobs: Field required``.
    (Validating against the whole union instead would report the union's first member.)
    """
    from pydantic import ValidationError

    sdk = "openai" if api == "responses" else "anthropic"
    kind = event.get("type") if isinstance(event, dict) else None
    classes = sdk_classes(api)
    if not isinstance(kind, str):
        return f"every event has a string 'type' naming it (one of {sdk}'s event types); got {kind!r}"
    if kind not in classes:
        close = difflib.get_close_matches(kind, list(classes), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        return f"{kind!r} is not an event type of {sdk}'s SDK{hint}"
    cls = classes[kind]
    opening = f"{kind} must be exactly {sdk}'s {cls.__name__}"
    try:
        model = cls.model_validate(event)
    except ValidationError as error:
        found = _real_errors(error.errors())
        first, alone = found[0]
        more = f" (and {len(found) - 1} more: {', '.join(_where(e['loc'], one) for e, one in found[1:4])})" \
            if len(found) > 1 else ""
        got = "" if first["type"] == "missing" else f", got {shorten(repr(first.get('input')), 40)}"
        return f"{opening}: {_where(first['loc'], alone)}: {first['msg']}{got}{more}"
    extra = _extra_fields(model)
    return f"{opening}: fields {cls.__name__} does not have: {extra}" if extra else None
