"""Lab-07's field reference: every event the formatters emit, its exact fields and an example.

Finding the exact fields of each event in the SDKs' type files is most of a lab-07 student's
time. This module writes that reference once, from what the reference formatters emit for a
few replies, each event checked against the official SDK class its ``type`` names
(:func:`mini_vllm.testing.events.sdk_problem`), and puts it in the lab's README between two
markers. ``tests/test_readme_tables.py`` regenerates it and fails when the README differs,
so the table cannot go stale:

    .venv/bin/python -m instructor.event_fields --write
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from typing import Any

from instructor.replies import reply_run
from mini_vllm.labs import lab_dir, load_lab
from mini_vllm.testing.events import sdk_classes, sdk_problem
from mini_vllm.testing.replies import ReplyRun

BEGIN, END = "<!-- event fields: begin (generated) -->", "<!-- event fields: end -->"
README = "README.md"
Event = dict[str, Any]
RESPONSE_ID, MODEL, CREATED_AT, INPUT_TOKENS = "resp_1", "mini-vllm", 1_700_000_000, 12

# The replies that, between them, make every event each formatter can emit (bpe, 16 tokens a step:
# few deltas, so the examples stay short).
RESPONSES_REPLIES: list[tuple[str, dict[str, Any]]] = [("think", {}), ("weather", {}), ("long", {"max_tokens": 20}),
                                                      ("broken tool", {})]
MESSAGES_REPLIES: list[tuple[str, dict[str, Any]]] = [("think then call", {}), ("hello", {}), ("broken tool", {})]


def _stream(formatter: Any, run: ReplyRun) -> list[Event]:
    """What the server sends for ``run``: start, every step, then finish (or fail)."""
    events: list[Event] = formatter.start()
    for step in run.steps:
        events += formatter.events(step)
    end: list[Event] = formatter.fail(run.error) if run.error else \
        formatter.finish(run.finish_reason, run.output_tokens, run.stop_reason)
    return events + end


def _variant(event: Event) -> str:
    """What tells apart the shapes one event type has: the item's, part's, block's or delta's own type."""
    for key in ("item", "part", "content_block", "delta"):
        inner = event.get(key)
        if isinstance(inner, dict) and isinstance(inner.get("type"), str):
            return str(inner["type"])
    return ""


def sample_events(api: str) -> Iterator[Event]:
    """Every event the reference formatter of ``api`` emits for the sample replies, in order."""
    lab = load_lab("lab-07", "solution")
    if api == "responses":
        for message, options in RESPONSES_REPLIES:
            yield from _stream(lab.ResponsesEventFormatter(RESPONSE_ID, MODEL, CREATED_AT, INPUT_TOKENS),
                               reply_run("bpe", message, 16, **options))
    else:
        for message, options in MESSAGES_REPLIES:
            formatter = lab.MessagesEventFormatter("msg_1", MODEL, INPUT_TOKENS, send_thinking=True)
            yield from _stream(formatter, reply_run("bpe", message, 16, **options))


def _task(api: str, event: Event) -> int:
    kind = event["type"]
    if api == "responses":
        if kind in ("response.created", "response.in_progress", "response.completed", "response.incomplete",
                    "response.failed"):
            return 3
        return 2 if "function_call" in kind or _variant(event) == "function_call" else 1
    return 5 if kind in ("message_start", "message_delta", "message_stop", "error") else 4


def _fields(api: str, event: Event) -> str:
    """The event's fields besides ``type``; a dict's keys in braces; ``?`` marks a field the SDK does not require."""
    required = {name for name, info in sdk_classes(api)[event["type"]].model_fields.items() if info.is_required()}
    shown = []
    for key, value in event.items():
        if key == "type":
            continue
        mark = "" if key in required else "?"
        if isinstance(value, dict):
            inner = ", ".join(f"{k}: {json.dumps(v)}" if k == "type" else k for k, v in value.items())
            shown.append(f"`{key}`{mark} {{{inner}}}")
        else:
            shown.append(f"`{key}`{mark}")
    return ", ".join(shown)


def _example(event: Event) -> str:
    """The event as sent, one line; of a lifecycle event's ``response`` body (in full below the table) only
    what sets it apart: its status, and its error or incomplete_details when it has one."""
    body = event.get("response")
    if isinstance(body, dict):
        telling = {k: v for k, v in body.items() if k == "status" or (k in ("error", "incomplete_details") and v)}
        event = {**event, "response": {**telling, "…": "…"}}
    text = json.dumps(event, ensure_ascii=False).replace("|", "\\|")
    return f"`{text}`"


def field_table(api: str) -> str:
    """One row per event type and shape: the task that writes it, the SDK class, the fields, an example."""
    rows = ["| event `type` (shape) | task | SDK class | fields besides `type` | example |", "|---|---|---|---|---|"]
    seen: set[tuple[str, str]] = set()
    for event in sample_events(api):
        key = (event["type"], _variant(event))
        if key in seen:
            continue
        problem = sdk_problem(api, event)
        if problem is not None:
            raise ValueError(f"the reference emits an event its SDK rejects: {problem}")
        seen.add(key)
        shape = f" ({key[1]})" if key[1] else ""
        cls = sdk_classes(api)[event["type"]].__name__
        rows.append(f"| `{event['type']}`{shape} | {_task(api, event)} | `{cls}` | {_fields(api, event)} | "
                    f"{_example(event)} |")
    return "\n".join(rows)


def _whole(api: str, kind: str) -> str:
    event = next(e for e in sample_events(api) if e["type"] == kind)
    return "```json\n" + json.dumps(event, ensure_ascii=False, indent=2) + "\n```"


def section() -> str:
    """The README's generated section, markers included."""
    return "\n".join([
        BEGIN,
        "",
        "**OpenAI Responses** (`openai.types.responses`):",
        "",
        field_table("responses"),
        "",
        "The `response` body the lifecycle events carry, here in `response.completed` (the usage shape",
        "included):",
        "",
        _whole("responses", "response.completed"),
        "",
        "**Anthropic Messages** (`anthropic.types`; `error` is `ErrorResponse`):",
        "",
        field_table("messages"),
        "",
        END,
    ])


def readme_text() -> str:
    return (lab_dir("lab-07") / README).read_text(encoding="utf-8")


def current_section(text: str) -> str | None:
    """The generated section as the README has it now (None when its markers are missing)."""
    if BEGIN not in text or END not in text:
        return None
    return text[text.index(BEGIN) : text.index(END) + len(END)]


def write() -> None:
    text = readme_text()
    old = current_section(text)
    if old is None:
        raise SystemExit(f"lab-07's README has no {BEGIN!r} ... {END!r} markers to write between")
    (lab_dir("lab-07") / README).write_text(text.replace(old, section()), encoding="utf-8")


if __name__ == "__main__":
    if sys.argv[1:] == ["--write"]:
        write()
    else:
        print(section())
