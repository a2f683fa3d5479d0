"""Replies that max_tokens cuts, inside a tool call or anywhere else: never a 5xx, and a whole (non-streamed)
body that is what each official SDK's stream accumulator builds from the same reply streamed.

The SDKs' accumulators are the yardstick a client really uses: the anthropic SDK's
``accumulate_event`` (what ``messages.stream().get_final_message()`` runs; it parses a cut
call's partial JSON), openai's ``ResponseStreamState`` and ``ChatCompletionStreamState``.
Everything runs in process (httpx's ASGI transport), so thousands of requests take seconds.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import pytest
from anthropic.lib.streaming._messages import accumulate_event
from anthropic.types import RawMessageStreamEvent
from openai._models import construct_type_unchecked
from openai.lib.streaming.chat import ChatCompletionStreamState
from openai.lib.streaming.responses._responses import ResponseStreamState
from openai.types.chat import ChatCompletionChunk
from openai.types.responses import ResponseStreamEvent

from mini_vllm.labs import load_lab
from mini_vllm.server import create_app
from mini_vllm.serving import MODEL_NAME, build_engine
from mini_vllm.toy_model import ToyModel
from mini_vllm.toy_scripts import SCRIPTS

LAB02, LAB07 = load_lab("lab-02", "solution"), load_lab("lab-07", "solution")
NAMES = ["get_weather", "book_table", "write_file"]
CHAT_TOOLS = [{"type": "function", "function": {"name": name, "parameters": {"type": "object"}}} for name in NAMES]
RESPONSES_TOOLS = [{"type": "function", "name": name, "parameters": {"type": "object"}} for name in NAMES]
MESSAGES_TOOLS = [{"name": name, "input_schema": {"type": "object"}} for name in NAMES]
ENDPOINTS = ("chat", "responses", "messages")


def request(endpoint: str, message: str, max_tokens: int, stream: bool) -> tuple[str, dict[str, Any]]:
    said = [{"role": "user", "content": message}]
    if endpoint == "chat":
        return "/v1/chat/completions", {"model": MODEL_NAME, "messages": said, "tools": CHAT_TOOLS,
                                        "max_tokens": max_tokens, "stream": stream,
                                        **({"stream_options": {"include_usage": True}} if stream else {})}
    if endpoint == "responses":
        return "/v1/responses", {"model": MODEL_NAME, "input": message, "tools": RESPONSES_TOOLS,
                                 "max_output_tokens": max_tokens, "stream": stream}
    return "/v1/messages", {"model": MODEL_NAME, "messages": said, "tools": MESSAGES_TOOLS,
                            "max_tokens": max_tokens, "stream": stream}


def run_requests(app: Any, work: Callable[[httpx.AsyncClient], Awaitable[None]]) -> None:
    async def main() -> None:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as client:
            await work(client)

    asyncio.run(main())


def stream_payloads(text: str) -> list[dict[str, Any]]:
    """The JSON of every ``data:`` line of a server-sent event stream (``[DONE]`` left out)."""
    lines = [line[6:] for line in text.splitlines() if line.startswith("data: ")]
    return [json.loads(line) for line in lines if line != "[DONE]"]


IDS = re.compile(r"(chatcmpl|resp|msg)-[0-9a-f]{24}|(call)_[0-9a-f]{16}")


def same_request(value: Any) -> Any:
    """``value`` with what differs between two requests for the same reply blanked: ids and clocks."""
    text = json.dumps(value, sort_keys=True, ensure_ascii=False)
    text = IDS.sub(lambda found: (found.group(1) or found.group(2)) + "-…", text)
    return re.sub(r'"(created|created_at)": \d+', r'"\1": 0', text)


# ------------------------------------------------------------------ what each SDK builds from the stream


def anthropic_final_message(events: list[dict[str, Any]]) -> dict[str, Any]:
    snapshot, buffers = None, {}  # type: ignore[var-annotated]
    for event in events:
        typed = construct_type_unchecked(type_=RawMessageStreamEvent, value=event)  # type: ignore[arg-type]
        snapshot = accumulate_event(event=typed, current_snapshot=snapshot, json_bufs=buffers)
    assert snapshot is not None, "the stream had no message_start"
    return snapshot.to_dict()


def openai_final_response(events: list[dict[str, Any]]) -> dict[str, Any]:
    """The response the stream ends with (``get_final_response()`` for a completed one; the SDK hands an
    incomplete one over in its ``response.incomplete`` event), checked against what the deltas built."""
    state: ResponseStreamState[Any] = ResponseStreamState(input_tools=[], text_format=openai_omit())
    for event in events:
        state.handle_event(construct_type_unchecked(type_=ResponseStreamEvent, value=event))  # type: ignore[arg-type]
    snapshot = getattr(state, "_ResponseStreamState__current_snapshot", None)  # the deltas, accumulated
    assert snapshot is not None, "the stream had no response.created"
    final = next(e["response"] for e in reversed(events) if e["type"] in ("response.completed", "response.incomplete"))
    built, said = said_by(snapshot.to_dict()["output"]), said_by(final["output"])
    assert built == said, f"the deltas built {built}, the final response says {said}"
    return dict(final)


def said_by(items: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    """What output items say: (type, name, text or arguments)."""
    return [(item["type"], item.get("name", ""), item.get("arguments") or "".join(
        part.get("text", "") for part in item.get("content") or item.get("summary") or ())) for item in items]


def openai_final_completion(chunks: list[dict[str, Any]]) -> dict[str, Any]:
    state: ChatCompletionStreamState[Any] = ChatCompletionStreamState(input_tools=CHAT_TOOLS)  # type: ignore[arg-type]
    for chunk in chunks:
        list(state.handle_chunk(ChatCompletionChunk.construct(**chunk)))
    return state.current_completion_snapshot.to_dict()


def openai_omit() -> Any:
    from openai import omit

    return omit


def compare(endpoint: str, whole: dict[str, Any], streamed: list[dict[str, Any]]) -> tuple[Any, Any]:
    """(the whole body's fields, the SDK's) that must agree, for ``endpoint``."""
    if endpoint == "messages":
        sdk = anthropic_final_message(streamed)
        keys = ("id", "role", "content", "stop_reason", "stop_sequence")
        return ({k: whole.get(k) for k in keys} | {"output_tokens": whole["usage"]["output_tokens"]},
                {k: sdk.get(k) for k in keys} | {"output_tokens": sdk["usage"]["output_tokens"]})
    if endpoint == "responses":
        sdk = openai_final_response(streamed)
        keys = ("id", "status", "output", "incomplete_details", "usage", "tools")
        return {k: whole.get(k) for k in keys}, {k: sdk.get(k) for k in keys}
    sdk = openai_final_completion(streamed)
    mine, theirs = whole["choices"][0], sdk["choices"][0]
    for call in theirs["message"].get("tool_calls") or ():  # the SDK's own additions, not fields of the wire's call
        call.pop("index", None)
        call["function"].pop("parsed_arguments", None)
    message_keys = ("role", "content", "tool_calls")
    return ({"finish_reason": mine["finish_reason"], "usage": whole["usage"],
             **{k: mine["message"].get(k) for k in message_keys}},
            {"finish_reason": theirs["finish_reason"], "usage": sdk.get("usage"),
             **{k: theirs["message"].get(k) for k in message_keys}})


@pytest.mark.parametrize("k", [1, 3])
def test_every_cut_of_the_call_builds_what_the_sdks_build_from_the_stream(k: int) -> None:
    """The weather reply (text, then a call) cut by every max_tokens from 1 to its length, on each API."""
    engine = build_engine("bpe", tokens_per_step=k)
    app = create_app(engine, MODEL_NAME, LAB02, events=LAB07)
    length = len(ToyModel(engine.tokenizer).reply_ids("weather"))
    differences: list[str] = []

    async def work(client: httpx.AsyncClient) -> None:
        for endpoint in ENDPOINTS:
            for max_tokens in range(1, length + 1):
                path, body = request(endpoint, "weather", max_tokens, stream=False)
                whole = await client.post(path, json=body)
                path, body = request(endpoint, "weather", max_tokens, stream=True)
                streamed = await client.post(path, json=body)
                assert whole.status_code == 200 and streamed.status_code == 200, (
                    f"{endpoint}, max_tokens={max_tokens}: {whole.status_code} {whole.text[:300]} / "
                    f"{streamed.status_code} {streamed.text[:300]}")
                mine, sdk = compare(endpoint, whole.json(), stream_payloads(streamed.text))
                if same_request(mine) != same_request(sdk):
                    differences.append(f"{endpoint}, max_tokens={max_tokens}:\n  whole body {mine}\n  SDK       {sdk}")

    run_requests(app, work)
    assert not differences, (f"the whole body must be what the SDK builds from the stream; {len(differences)} cuts "
                             f"differ, the first:\n{differences[0]}")


# Every scripted reply but "long" (thousands of tokens of plain prose: any cut of it is a cut of plain
# text, as "japanese" and "stop" have) and "write file" (the same shapes as "weather", 600-700 tokens:
# its every cut alone would be a quarter of a million engine tokens on each endpoint).
BLACK_BOX_SCRIPTS = [name for name in SCRIPTS if name not in ("long", "write file")]


@pytest.mark.slow  # a red team: every cut of every scripted reply on three endpoints (11 s of CPU): make check
@pytest.mark.parametrize("endpoint", ENDPOINTS)
@pytest.mark.parametrize("tokenizer", ["bpe", "spm"])
def test_no_cut_of_any_scripted_reply_is_a_server_error(tokenizer: str, endpoint: str) -> None:
    """Black box: every reply, every max_tokens from 1 to its length, streamed and not: a 200, and a stream
    that ends with no error event. (8 tokens a step keeps it to seconds; a cut falls inside a step as often
    as at its end. The requests go straight to the ASGI app: an HTTP client's own work would be most of it.)"""
    engine = build_engine(tokenizer, tokens_per_step=8)
    app = create_app(engine, MODEL_NAME, LAB02, events=LAB07)
    model = ToyModel(engine.tokenizer)
    cases = [(name, max_tokens, stream) for name in BLACK_BOX_SCRIPTS
             for max_tokens in range(1, len(model.reply_ids(name)) + 1) for stream in (False, True)]
    failures: list[str] = []

    async def one(name: str, max_tokens: int, stream: bool) -> None:
        path, body = request(endpoint, name, max_tokens, stream)
        status, text = await asgi_post(app, path, body)
        failed = status >= 500 or (stream and stream_failed(text))
        # "broken tool": the model writes a malformed call, and a failure that says so is the honest answer.
        if failed and not (name == "broken tool" and "malformed tool call" in text):
            failures.append(f"{name!r} max_tokens={max_tokens} stream={stream}: {status} {text[-300:]}")

    async def work() -> None:
        for start in range(0, len(cases), 16):  # 16 at a time: one's worker-thread hop is another's turn
            await asyncio.gather(*(one(*case) for case in cases[start:start + 16]))

    asyncio.run(work())
    assert len(cases) > 1000
    assert not failures, f"{len(failures)} of {len(cases)} cut replies failed; the first:\n" + "\n".join(failures[:3])


def stream_failed(text: str) -> bool:
    """An error reported in the stream: an ``error`` event or chunk, or ``response.failed``."""
    return any(payload.get("type") in ("error", "response.failed") or ("error" in payload and "type" not in payload)
               for payload in stream_payloads(text))


async def asgi_post(app: Any, path: str, body: dict[str, Any]) -> tuple[int, str]:
    """POST ``body`` to the ASGI ``app`` as a server would hand it over; the status and the whole reply."""
    raw = json.dumps(body).encode()
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST", "scheme": "http",
             "path": path, "raw_path": path.encode(), "query_string": b"", "root_path": "",
             "headers": [(b"host", b"test"), (b"content-type", b"application/json")],
             "client": ("127.0.0.1", 1), "server": ("test", 80)}
    delivered, never = False, asyncio.Event()
    status, chunks = 0, []

    async def receive() -> dict[str, Any]:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": raw, "more_body": False}
        await never.wait()  # the client never hangs up
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))

    await app(scope, receive, send)
    return status, b"".join(chunks).decode()
