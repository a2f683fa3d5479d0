"""The READMEs' tables of what the server sends are what it really sends.

- The root README's "One reply, three protocols" table: the event sequence (and every count
  in it) of the Responses and Messages streams the server sends for the lab-07 README's own
  ``curl`` requests, on `make serve`'s defaults (the bpe tokenizer, one token per step).
- The lab-07 README's walk-through of one reply: its StepOutput table and its two event
  listings are the reference pipeline's and formatters' output at 16 tokens per step.
- The lab-07 README's field tables are the generated ones (``instructor/event_fields.py``).
"""

from __future__ import annotations

import json
import re
from itertools import groupby
from typing import Any

import httpx

from instructor import event_fields
from instructor.replies import reply_run
from mini_vllm.labs import REPO_ROOT, lab_dir, load_lab
from mini_vllm.serving import BackgroundServer, build_engine

ROOT_README = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
LAB07_README = (lab_dir("lab-07") / "README.md").read_text(encoding="utf-8")
EVENT_NAME = re.compile(r"(?:(\d+) × )?`(\.?[a-z_]+(?:\.[a-z_]+)*)`")


def section(text: str, heading: str) -> str:
    start = text.index(heading)
    end = text.find("\n## ", start + len(heading))
    return text[start : end if end != -1 else len(text)]


def readme_requests() -> dict[str, dict[str, Any]]:
    """The JSON bodies of the lab-07 README's curl commands, by path."""
    found = re.findall(r"curl -N http://127\.0\.0\.1:8000(/v1/\w+) .*?-d '(\{.*?\})'", LAB07_README, re.S)
    return {path: json.loads(body) for path, body in found}


def kind(event: dict[str, Any]) -> str:
    """An event's type; a Messages delta by its delta's type, as the README names it."""
    return str(event["delta"]["type"]) if event["type"] == "content_block_delta" else str(event["type"])


def runs(kinds: list[str]) -> list[tuple[str, int]]:
    """Consecutive events of one kind as (kind, how many)."""
    return [(name, len(list(group))) for name, group in groupby(kinds)]


def table_column(column: int) -> list[tuple[str, int]]:
    """The event names (with their ``N ×`` counts) in one column of the root README's protocol table."""
    rows = [line.split(" | ") for line in section(ROOT_README, "## One reply, three protocols").splitlines()
            if line.startswith("| ") and not line.startswith("| step")]
    named: list[tuple[str, int]] = []
    for row in rows:
        for count, name in EVENT_NAME.findall(row[column]):
            named.append((name, int(count or 1)))
    return named


def responses_names(named: list[tuple[str, int]]) -> list[tuple[str, int]]:
    """The table writes Responses events without their ``response.`` prefix, and ``.done`` after its delta."""
    full: list[tuple[str, int]] = []
    for name, count in named:
        if name.startswith("."):
            name = full[-1][0].rsplit(".", 1)[0] + name
        elif not name.startswith("response."):
            name = "response." + name
        full.append((name, count))
    return full


def server_streams() -> dict[str, list[str]]:
    requests = readme_requests()
    assert set(requests) == {"/v1/responses", "/v1/messages"}, f"the lab-07 README's curl requests: {sorted(requests)}"
    streams = {}
    with BackgroundServer(build_engine("bpe")) as server, httpx.Client(timeout=30) as client:
        root = server.base_url.removesuffix("/v1")
        for path, body in requests.items():
            response = client.post(root + path, json=body)
            assert response.status_code == 200, f"{path}: {response.status_code} {response.text[:300]}"
            data = [line.removeprefix("data: ") for line in response.text.splitlines() if line.startswith("data: ")]
            streams[path] = [kind(json.loads(payload)) for payload in data]
    return streams


def test_the_root_readme_protocol_table_is_what_the_server_sends() -> None:
    streams = server_streams()
    sent = runs(streams["/v1/responses"])
    written = responses_names([(name, count) for name, count in table_column(2) if "." in name or "_" in name])
    assert written == sent, ("README.md, 'One reply, three protocols', Responses column: the server sends\n"
                             f"  {sent}\nthe table says\n  {written}")
    sent = runs(streams["/v1/messages"])
    written = table_column(3)
    assert written == sent, ("README.md, 'One reply, three protocols', Messages column: the server sends\n"
                             f"  {sent}\nthe table says\n  {written}")


def walkthrough_run() -> Any:
    return reply_run("bpe", "think then call", 16)


def reference_stream(formatter: Any) -> list[dict[str, Any]]:
    run = walkthrough_run()
    events: list[dict[str, Any]] = formatter.start()
    for step in run.steps:
        events += formatter.events(step)
    return events + formatter.finish(run.finish_reason, run.output_tokens, run.stop_reason)


def test_the_lab07_walkthrough_is_the_reference_output() -> None:
    """lab-07 README, 'One reply, three channels, two protocols': the StepOutputs and both event listings."""
    background = section(LAB07_README, "### One reply, three channels, two protocols")
    blocks = re.findall(r"```\n(.*?)```", background, re.S)
    step_rows = [line for line in blocks[0].splitlines() if re.match(r"^\s*\d+\s", line)]
    run = walkthrough_run()
    assert len(step_rows) == len(run.steps), f"{len(run.steps)} StepOutputs, the table shows {len(step_rows)}"
    for row, step in zip(step_rows, run.steps, strict=True):
        pieces = [json.dumps(step.reasoning, ensure_ascii=False)] if step.reasoning else []
        pieces += [json.dumps(step.text, ensure_ascii=False)] if step.text else []
        for delta in step.tool_call_deltas:
            pieces += [f"index {delta.index}"] + ([f'name "{delta.name}"'] if delta.name else [])
            pieces += [f"'{delta.arguments_fragment}'"] if delta.arguments_fragment else []
        pieces += [f'"{step.finish_reason}"'] if step.finish_reason else []
        missing = [piece for piece in pieces if piece not in row]
        assert not missing, f"the StepOutput row {row.strip()!r} should show {missing}"
    lab = load_lab("lab-07", "solution")
    sent = [e["type"] for e in reference_stream(lab.ResponsesEventFormatter("resp_1", "mini-vllm", 0))]
    listed = re.findall(r"^\s*\d+ (response\.[a-z_.]+)", blocks[1], re.M)
    assert listed == sent, f"the Responses listing:\n  README    {listed}\n  reference {sent}"
    formatter = lab.MessagesEventFormatter("msg_1", "mini-vllm", send_thinking=True)
    sent = [kind(e) for e in reference_stream(formatter)]
    listed = [delta or name for name, delta in re.findall(
        r"^(message_\w+|content_block_\w+)\s+(?:index \d+, )?(\w+_delta)?", blocks[2], re.M)]
    assert listed == sent, f"the Messages listing:\n  README    {listed}\n  reference {sent}"


def test_the_lab07_field_tables_are_current() -> None:
    written = event_fields.current_section(LAB07_README)
    assert written is not None, f"lab-07's README lost its {event_fields.BEGIN!r} markers"
    assert written == event_fields.section(), (
        "lab-07's README field tables differ from what the reference formatters and the SDKs say now: run "
        "`.venv/bin/python -m instructor.event_fields --write`")
