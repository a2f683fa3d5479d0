"""The server under the faults clients bring: a huge prompt beside a live stream, clients that hang up
on a whole (non-streamed) response, and 64 clients at once; then one test per finding of issue 26's
hostile-client review (500s from client input, stalls, unbounded cost, cut requests, leaks, inconsistent
errors). All traffic goes to 127.0.0.1; every load is bounded in count.

No test here asserts an absolute time. The stall test compares the live stream's gaps with the
time the huge request took, both measured in the same run, so a slow or busy machine stretches
both alike.
"""

from __future__ import annotations

import asyncio
import http.client
import itertools
import json
import logging
import random
import socket
import statistics
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import openai
import pytest

from mini_vllm import demo
from mini_vllm.api.models import MAX_MESSAGES, MAX_STOP_CHARS, MAX_TOOLS
from mini_vllm.engine import RECENT_IDS, Engine
from mini_vllm.kv_pool import BlockPool
from mini_vllm.labs import load_lab
from mini_vllm.sampling import SamplingParams
from mini_vllm.server import bodies
from mini_vllm.server.bodies import MAX_JSON_OBJECTS
from mini_vllm.serving import MODEL_NAME, BackgroundServer, build_engine
from mini_vllm.toy_model import ToyModel
from mini_vllm.toy_scripts import script_for

# The load tests and the hostile-client review (the server's red team): in make check, not make test.
pytestmark = pytest.mark.slow

SOLUTION = load_lab("lab-02", "solution")


def wait_until(condition: object, what: str, seconds: float = 20) -> None:
    deadline = time.monotonic() + seconds
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"gave up waiting: {what}"
        time.sleep(0.01)


@pytest.fixture(scope="module")
def slow_server() -> Iterator[BackgroundServer]:
    """5 ms a token; a context so large that a prompt of a million characters is tokenized, not refused unread."""
    with BackgroundServer(build_engine("bpe", token_delay_s=0.005, max_model_len=1 << 24), pipeline=SOLUTION) as s:
        yield s


def huge_cjk_prompt(characters: int) -> str:
    """Varied CJK text (a repeated phrase would hit the tokenizer's word cache and cost nothing)."""
    draw = random.Random(17)
    return "".join(chr(draw.randrange(0x4E00, 0x9FFF)) if draw.random() < 0.85 else " " for _ in range(characters))


def test_a_huge_prompt_does_not_stall_a_live_stream(slow_server: BackgroundServer) -> None:
    """Parsing and tokenizing run in a worker thread: while a 1 MB prompt is read, the other stream keeps flowing.

    On the event loop, the other stream would wait the whole tokenization: its largest gap is then
    the huge request's whole duration (measured: 98% of it). In a thread it must stay under half,
    a margin wide enough for a machine so busy that the OS itself holds threads back.
    """
    arrivals: list[float] = []
    huge_began = threading.Event()
    done = threading.Event()

    def live_stream() -> None:
        body = {"model": MODEL_NAME, "messages": [{"role": "user", "content": "long"}], "stream": True}
        with httpx.Client(timeout=60) as client, client.stream("POST", slow_server.base_url + "/chat/completions",
                                                               json=body) as response:
            for line in response.iter_lines():
                if line.startswith("data: "):
                    arrivals.append(time.perf_counter())
                if done.is_set():
                    return

    reader = threading.Thread(target=live_stream)
    reader.start()
    try:
        wait_until(lambda: len(arrivals) >= 60, "the live stream's first chunks")
        baseline = statistics.median(b - a for a, b in itertools.pairwise(arrivals[10:60]))
        prompt = huge_cjk_prompt(400_000)
        huge_began.set()
        began = time.perf_counter()
        response = httpx.post(slow_server.base_url + "/completions", timeout=120,
                              json={"model": MODEL_NAME, "prompt": prompt, "max_tokens": 1})
        ended = time.perf_counter()
    finally:
        done.set()
        reader.join(timeout=30)
    assert response.status_code in (200, 400), response.text[:300]  # 400: it tokenized, then could not fit the cache
    during = [t for t in arrivals if began <= t <= ended]
    gaps = [b - a for a, b in zip([began, *during], [*during, ended], strict=True)]
    took = ended - began
    assert len(during) >= 3, f"the live stream got {len(during)} chunks in the {took:.2f} s the huge request took"
    assert max(gaps) < 0.5 * took, (
        f"the live stream stalled: its largest gap was {max(gaps) * 1000:.0f} ms while the huge request took "
        f"{took * 1000:.0f} ms (its usual gap: {baseline * 1000:.1f} ms). Is the prompt tokenized on the event loop?")


def test_a_client_that_leaves_a_whole_response_aborts_it_and_frees_its_blocks(slow_server: BackgroundServer) -> None:
    engine = slow_server.engine
    wait_until(lambda: not engine.running, "the earlier tests' requests to end")
    free_before = engine.pool.num_free_blocks
    connections = []
    for _ in range(4):
        connection = http.client.HTTPConnection("127.0.0.1", slow_server.port, timeout=30)
        connection.request("POST", "/v1/chat/completions", headers={"content-type": "application/json"},
                           body=json.dumps({"model": MODEL_NAME, "messages": [{"role": "user", "content": "long"}],
                                           "max_tokens": 4000}))  # the default would reserve the whole pool
        connections.append(connection)
    wait_until(lambda: len(engine.running) == 4, "four requests running")
    assert engine.pool.num_free_blocks < free_before
    ids = set(engine.running)
    for connection in connections:
        connection.close()  # hang up without reading: nobody will ever read this reply
    wait_until(lambda: not engine.running, "the abandoned requests to be aborted")
    assert engine.pool.num_free_blocks == free_before, "every block of the abandoned requests comes back"
    assert ids <= set(engine.stats.aborted), "they were aborted, not run to the end"


@pytest.mark.timeout(120)
def test_sixty_four_clients_each_get_their_own_reply() -> None:
    prompts = ["japanese", "chinese", "emoji", "hello", "stop", "think"] * 11
    with BackgroundServer(build_engine("byte"), pipeline=SOLUTION) as running:
        client = openai.OpenAI(base_url=running.base_url, api_key="not-needed", max_retries=0, timeout=60)

        def ask(prompt: str) -> str:
            stream = client.chat.completions.create(model=MODEL_NAME, stream=True,
                                                    messages=[{"role": "user", "content": prompt}])
            return "".join(c.choices[0].delta.content or "" for c in stream if c.choices)

        with ThreadPoolExecutor(64) as pool:
            replies = list(pool.map(ask, prompts[:64]))
        assert running.engine.pool.num_free_blocks == running.engine.pool.num_blocks and not running.engine.running
    thinking_answer = script_for("think").split("</think>")[1]
    for prompt, reply in zip(prompts, replies, strict=False):
        expected = thinking_answer if prompt == "think" else script_for(prompt)
        assert reply == expected, f"client asking {prompt!r} got someone else's or a broken reply: {reply[:80]!r}"


# ------------------------------------------------------------------ issue 26: one test per finding

TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]
HI = [{"role": "user", "content": "hi"}]
ENDPOINTS = {"chat": "/v1/chat/completions", "completions": "/v1/completions", "responses": "/v1/responses",
             "messages": "/v1/messages"}


@pytest.fixture(scope="module")
def server() -> Iterator[BackgroundServer]:
    with BackgroundServer(build_engine("bpe", max_model_len=4096), pipeline=SOLUTION) as running:
        yield running


def good_body(endpoint: str, **fields: object) -> dict[str, object]:
    """The smallest request each endpoint answers with 200, with ``fields`` changed."""
    base: dict[str, object] = {"chat": {"messages": HI}, "completions": {"prompt": "hi"},
                               "responses": {"input": "hi"}, "messages": {"messages": HI, "max_tokens": 20}}[endpoint]
    return {"model": MODEL_NAME, **base, **fields}


def post_raw(server: BackgroundServer, endpoint: str, raw: bytes,
             content_type: str = "application/json") -> tuple[int, dict[str, object]]:
    reply = httpx.post(f"http://127.0.0.1:{server.port}{ENDPOINTS[endpoint]}", content=raw, timeout=30,
                       headers={"content-type": content_type})
    return reply.status_code, reply.json()


def error_of(endpoint: str, body: dict[str, object]) -> dict[str, object]:
    """The error object, OpenAI's or Anthropic's (``/v1/messages``), checked for its provider's shape."""
    error = body["error"]
    assert isinstance(error, dict)
    if endpoint == "messages":
        assert body["type"] == "error" and set(error) == {"type", "message"}, body
    else:
        assert set(error) == {"message", "type", "param", "code"}, body
    return error


SURROGATE = "\\ud800"  # in JSON text: a valid escape for something that is no character
SURROGATE_CASES = [
    *[(endpoint, json.dumps(good_body(endpoint, model="MODEL")).replace("MODEL", SURROGATE), "model")
      for endpoint in ENDPOINTS],
    ("chat", json.dumps(good_body("chat", messages=[*HI, {"role": "assistant", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "NAME", "arguments": "{}"}}]}])).replace(
        "NAME", SURROGATE), "messages[1].tool_calls[0].function.name"),
    *[("messages", json.dumps(good_body("messages", messages=[*HI, {"role": "assistant", "content": [
        {"type": "tool_use", "id": "t1", "name": name, "input": {key: value}}]}])).replace("X", SURROGATE), where)
      for name, key, value, where in [("X", "k", "v", "messages[1].content[0].name"),
                                      ("n", "X", "v", "messages[1].content[0].input."),
                                      ("n", "k", "X", "messages[1].content[0].input.k")]],
]


@pytest.mark.parametrize(("endpoint", "raw", "field"), SURROGATE_CASES,
                         ids=[f"{case[0]}-{case[2]}" for case in SURROGATE_CASES])
def test_a_lone_surrogate_anywhere_is_a_400_naming_its_field(server: BackgroundServer, endpoint: str, raw: str,
                                                              field: str) -> None:
    """Found: a lone surrogate in ``model``, a call's name or a tool_use's input was a 500 (UnicodeEncodeError),
    and the 404 for an unknown model echoed the raw name."""
    status, body = post_raw(server, endpoint, raw.encode())
    error = error_of(endpoint, body)
    assert status == 400, (status, body)
    assert field in str(error["message"]), f"the message must name {field!r}: {error}"
    if endpoint != "messages":
        assert str(error["param"]).startswith(field) and error["code"] == "invalid_unicode", error
    json.dumps(body, ensure_ascii=False).encode("utf-8")  # nothing raw came back: it all encodes


@pytest.mark.parametrize("text", [{"format": "json"}, {"format": 1}, {"format": {"type": 7}},
                                  {"format": {"type": "json_schema"}}, {"colour": "red"}])
def test_text_format_is_checked(server: BackgroundServer, text: dict[str, object]) -> None:
    """Found: ``"text": {"format": "json"}`` (or ``1``) on /v1/responses was a 500 (AttributeError)."""
    status, body = post_raw(server, "responses", json.dumps(good_body("responses", text=text)).encode())
    error = error_of("responses", body)
    assert status == 400 and str(error["param"]).startswith("text") and error["code"], (status, body)
    status, _ = post_raw(server, "responses", json.dumps(good_body("responses", text={"format": {"type": "text"}}))
                         .encode())
    assert status == 200


BOUNDS = [  # (endpoint, fields, the field the 400 names)
    ("chat", {"stop": ["a", "b", "c", "d", "e"]}, "stop"),  # OpenAI's limit: 4
    ("completions", {"stop": "x" * (MAX_STOP_CHARS + 1)}, "stop"),
    ("messages", {"stop_sequences": [f"s{i}" for i in range(17)]}, "stop_sequences"),
    ("messages", {"stop_sequences": ["x" * (MAX_STOP_CHARS + 1)]}, "stop_sequences[0]"),
    ("chat", {"messages": HI * (MAX_MESSAGES + 1)}, "messages"),
    ("responses", {"input": [{"role": "user", "content": "hi"}] * (MAX_MESSAGES + 1)}, "input"),
    ("chat", {"tools": TOOLS * (MAX_TOOLS + 1)}, "tools"),
]


@pytest.mark.parametrize(("endpoint", "fields", "field"), BOUNDS, ids=[f"{b[0]}-{b[2]}" for b in BOUNDS])
def test_what_one_request_may_ask_for_is_bounded(server: BackgroundServer, endpoint: str, fields: dict[str, object],
                                                 field: str) -> None:
    """Found: any number of stop strings of any length (100 of 15,000 characters cost 71 s of event-loop CPU),
    and any number of messages. The bounds are in the OpenAPI document too."""
    status, body = post_raw(server, endpoint, json.dumps(good_body(endpoint, **fields)).encode())
    error = error_of(endpoint, body)
    assert status == 400 and field in str(error["message"]), (status, error)
    if endpoint != "messages":
        assert error["param"] == field and error["code"], error


def test_a_body_of_too_many_json_objects_is_refused_while_it_is_parsed(server: BackgroundServer) -> None:
    """More objects than any honest request needs: refused as soon as the parse has counted them."""
    raw = json.dumps(good_body("chat", messages=[{"role": "user", "content": "w"}] * (MAX_JSON_OBJECTS + 1)))
    status, body = post_raw(server, "chat", raw.encode())
    assert status == 400 and error_of("chat", body)["code"] == "request_too_large", body


@pytest.mark.timeout(120)
def test_big_bodies_are_parsed_one_at_a_time_beside_a_live_stream(slow_server: BackgroundServer,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Found: a 15 MB body of 450,000 one-word messages held every stream for 1.6 s, and eight at once took
    the server from 463 MB to 2.24 GB. Big bodies now wait their turn (at most one parsed at a time), and the
    parse counts objects as it goes (stopping at MAX_JSON_OBJECTS), giving the event loop its turns.

    Measured (issue 26 report): one such body, the live stream's largest gap
    4.0-4.5 s before, 0.16-0.28 s after; eight: 32.7 s before, 0.23-0.26 s after; peak RSS 2.8 GB -> 0.4-0.6 GB.
    Here: no absolute time, only the live stream's largest gap against the time the big bodies took.
    """
    parsing, most = 0, 0
    parse = bodies.parse_body

    def counted(raw: bytes, model: type) -> object:
        nonlocal parsing, most
        parsing += 1
        most = max(most, parsing)
        try:
            return parse(raw, model)
        finally:
            parsing -= 1

    monkeypatch.setattr(bodies, "parse_body", counted)
    big = json.dumps({"model": MODEL_NAME, "messages": [{"role": "user", "content": "word"}] * 450_000}).encode()
    arrivals: list[float] = []
    done = threading.Event()

    def live_stream() -> None:
        body = {"model": MODEL_NAME, "messages": [{"role": "user", "content": "long"}], "stream": True,
                "max_tokens": 4000}
        with httpx.Client(timeout=60) as client, client.stream("POST", slow_server.base_url + "/chat/completions",
                                                               json=body) as response:
            for line in response.iter_lines():
                if line.startswith("data: "):
                    arrivals.append(time.perf_counter())
                if done.is_set():
                    return

    reader = threading.Thread(target=live_stream)
    reader.start()
    try:
        wait_until(lambda: len(arrivals) >= 20, "the live stream's first chunks")
        began = time.perf_counter()
        with ThreadPoolExecutor(4) as pool:
            statuses = list(pool.map(lambda _: httpx.post(slow_server.base_url + "/chat/completions", content=big,
                                                          timeout=120).status_code, range(4)))
        ended = time.perf_counter()
    finally:
        done.set()
        reader.join(timeout=30)
    assert statuses == [400] * 4, statuses
    assert most == 1, f"{most} big bodies were parsed at once: each holds its parsed copy in memory"
    during = [t for t in arrivals if began <= t <= ended]
    gaps = [b - a for a, b in zip([began, *during], [*during, ended], strict=True)]
    assert max(gaps) < 0.5 * (ended - began), (
        f"the live stream stalled {max(gaps) * 1000:.0f} ms of the {(ended - began) * 1000:.0f} ms the bodies took")


@pytest.mark.timeout(120)
def test_a_running_request_is_never_cut_short_by_others_using_the_cache() -> None:
    """Found: 16 streams of 32,000-token prompts, none with max_tokens; 3 stopped at 704 tokens with
    finish_reason "length": admission took only the prompt and one token. Now it takes the prompt and
    max_tokens, or waits its turn. Here: a pool of 1,024 tokens, six requests of 500 that fit two at a time."""
    engine = Engine(ToyModel(build_engine("bpe").tokenizer), BlockPool(num_blocks=64, block_size=16))
    prompt = "long " + "word " * 280
    with BackgroundServer(engine, pipeline=SOLUTION) as running:
        client = openai.OpenAI(base_url=running.base_url, api_key="not-needed", max_retries=0, timeout=60)

        def ask(_: int) -> tuple[str | None, int]:
            reply = client.chat.completions.create(model=MODEL_NAME, max_tokens=200,
                                                   messages=[{"role": "user", "content": prompt}])
            assert reply.usage is not None
            return reply.choices[0].finish_reason, reply.usage.completion_tokens

        with ThreadPoolExecutor(6) as pool:
            results = list(pool.map(ask, range(6)))
        assert engine.pool.num_free_blocks == 64 and not engine.running and not engine.num_waiting
    assert results == [("length", 200)] * 6, f"every reply runs to its own max_tokens: {results}"


def test_a_tokenizer_is_loaded_off_the_event_loop(server: BackgroundServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """Found: the first request on the tekken demo held the event loop 3.4 s while its 131k vocabulary loaded.
    The demo now loads a tokenizer (and builds its server) in a worker thread: the loader must find no event
    loop running where it runs. (Deterministic: the loader reports where it ran, no clock involved.)"""
    loaded_on_loop: list[bool] = []
    load = demo.load_tokenizer

    def recording(name: str) -> object:
        try:
            asyncio.get_running_loop()
            loaded_on_loop.append(True)
        except RuntimeError:
            loaded_on_loop.append(False)
        return load(name)

    monkeypatch.setattr(demo, "load_tokenizer", recording)
    demo.load_demo_tokenizer.cache_clear()
    root = f"http://127.0.0.1:{server.port}"
    try:
        assert httpx.get(f"{root}/demo/tokenizers/spm/v1/models", timeout=60).status_code == 200
        assert httpx.get(f"{root}/demo/token-bytes", params={"tokenizer": "byte", "script": "emoji"},
                         timeout=60).status_code == 200
    finally:
        demo.load_demo_tokenizer.cache_clear()
    assert loaded_on_loop == [False, False], f"loaded on the event loop: {loaded_on_loop}"


def test_a_client_that_leaves_mid_body_is_no_error(server: BackgroundServer, caplog: pytest.LogCaptureFixture) -> None:
    """Found: a client that hung up halfway through its body was logged as an "unhandled error" with a traceback."""
    with caplog.at_level(logging.INFO, logger="mini_vllm.server"):
        for _ in range(3):
            with socket.create_connection(("127.0.0.1", server.port), timeout=10) as raw:
                raw.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                            b"Content-Length: 100000\r\n\r\n" + b'{"model": "mini-vllm", "messages": [')
        wait_until(lambda: sum("left mid-body" in r.getMessage() for r in caplog.records) >= 3, "the server to notice")
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], [r.getMessage() for r in caplog.records]
    assert httpx.get(f"http://127.0.0.1:{server.port}/health").status_code == 200


def test_the_engine_statistics_stay_bounded() -> None:
    """Found: EngineStats kept every request id forever (82 bytes a request). Now: exact counts, recent ids."""
    engine = build_engine("byte")

    async def run(count: int) -> None:
        for i in range(count):
            async for _ in engine.generate(f"r{i}", [1], "hi", SamplingParams(max_tokens=1)):
                pass

    asyncio.run(run(RECENT_IDS + 200))
    assert engine.stats.num_finished == RECENT_IDS + 200 and len(engine.stats.finished) == RECENT_IDS
    assert engine.stats.finished[-1] == f"r{RECENT_IDS + 199}", "the most recent ids are the ones kept"


def test_content_types_and_error_codes_are_consistent(server: BackgroundServer) -> None:
    """Found: Content-Type text/plain accepted on two endpoints and refused on two; ``param`` naming no field
    (``input[0]._item_type()``, ``max_tokens`` on the Responses API, null for an empty body); null codes on
    4xx. Every endpoint reads its body as JSON whatever the content type, as OpenAI does, and every 4xx
    names a real field (or none) with a code."""
    for endpoint in ENDPOINTS:
        status, body = post_raw(server, endpoint, json.dumps(good_body(endpoint)).encode(), "text/plain")
        assert status == 200, (endpoint, body)
        status, body = post_raw(server, endpoint, b"")
        error = error_of(endpoint, body)
        assert status == 400 and "not valid JSON" in str(error["message"]), (endpoint, body)
        assert endpoint == "messages" or error["code"] == "invalid_json", error
    cases = [("responses", good_body("responses", input=[{"type": "wizard"}]), "input[0].type"),
             ("responses", good_body("responses", input="東京 " * 5000), "input"),
             ("responses", good_body("responses", max_output_tokens=4096), "max_output_tokens"),
             ("chat", good_body("chat", max_completion_tokens=4096), "max_completion_tokens"),
             ("completions", good_body("completions", prompt="東京 " * 5000), "prompt"),
             ("chat", good_body("chat", messages=[{"role": "user", "content": [{"type": "text", "text": 5}]}]),
              "messages[0].content[0].text")]
    for endpoint, request, field in cases:
        status, body = post_raw(server, endpoint, json.dumps(request).encode())
        error = error_of(endpoint, body)
        assert status == 400 and error["param"] == field and error["code"], (field, error)
        assert "at at" not in str(error["message"]), error
    reply = httpx.post(f"http://127.0.0.1:{server.port}/v1/chat/complete", json=good_body("chat"))
    assert reply.status_code == 404 and reply.json()["error"]["code"] == "unknown_url", reply.text


ORPHANS = [
    ("chat", {"messages": [*HI, {"role": "tool", "tool_call_id": "call_1", "content": "sunny"}]},
     "messages[1].tool_call_id"),
    ("responses", {"input": [{"role": "user", "content": "hi"},
                             {"type": "function_call_output", "call_id": "call_1", "output": "sunny"}]},
     "input[1].call_id"),
    ("messages", {"messages": [*HI, {"role": "assistant", "content": "ok"}, {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny"}]}]},
     "messages[2].content[0].tool_use_id"),
]


@pytest.mark.parametrize(("endpoint", "fields", "field"), ORPHANS, ids=[o[0] for o in ORPHANS])
def test_a_tool_result_that_answers_no_call_is_refused(server: BackgroundServer, endpoint: str,
                                                       fields: dict[str, object], field: str) -> None:
    """Found: an orphan ``tool`` message / ``function_call_output`` / ``tool_result`` was accepted; the real
    APIs answer 400. The same result after the call it answers is accepted."""
    status, body = post_raw(server, endpoint, json.dumps(good_body(endpoint, **fields)).encode())
    error = error_of(endpoint, body)
    assert status == 400 and field in str(error["message"]), (status, body)
    status, body = post_raw(server, endpoint, json.dumps(good_body(endpoint, **with_the_call(endpoint, fields)))
                            .encode())
    assert status == 200, body


def with_the_call(endpoint: str, fields: dict[str, Any]) -> dict[str, Any]:
    """The same conversation with the call the result answers made first."""
    if endpoint == "chat":
        call = {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}
        return {"messages": [*HI, {"role": "assistant", "tool_calls": [call]}, *fields["messages"][1:]]}
    if endpoint == "responses":
        call = {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": "{}"}
        return {"input": [call, *fields["input"]]}
    use = {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {}}
    return {"messages": [*HI, {"role": "assistant", "content": [use]}, fields["messages"][2]]}


def test_response_created_echoes_the_tools_that_were_sent(server: BackgroundServer) -> None:
    """Found: ``response.created`` said ``"tools": []`` though tools were sent."""
    tools = [{"type": "function", "name": "get_weather", "parameters": {"type": "object"}}]
    request = good_body("responses", input="weather", tools=tools, stream=True, parallel_tool_calls=False)
    with httpx.stream("POST", f"http://127.0.0.1:{server.port}/v1/responses", json=request, timeout=30) as reply:
        events = [json.loads(line[6:]) for line in reply.iter_lines() if line.startswith("data: ")]
    for event in (e for e in events if e["type"] in ("response.created", "response.completed")):
        assert [tool["name"] for tool in event["response"]["tools"]] == ["get_weather"], event
        assert event["response"]["parallel_tool_calls"] is False, event


def test_a_client_that_leaves_while_its_request_waits_for_blocks_leaves_the_line() -> None:
    """The line for KV blocks is new: a client that hangs up while waiting must take its place out of it,
    holding no blocks, and the requests behind it still run."""
    engine = Engine(ToyModel(build_engine("byte").tokenizer), BlockPool(num_blocks=8, block_size=16),  # 128 tokens
                    token_delay_s=0.03)  # the first request holds its blocks for nearly two seconds
    body = json.dumps({"model": MODEL_NAME, "messages": [{"role": "user", "content": "long"}], "max_tokens": 60})
    with BackgroundServer(engine, pipeline=SOLUTION) as running:
        client = openai.OpenAI(base_url=running.base_url, api_key="not-needed", max_retries=0, timeout=60)
        with ThreadPoolExecutor(2) as pool:
            first = pool.submit(client.chat.completions.create, model=MODEL_NAME, max_tokens=60,
                                messages=[{"role": "user", "content": "long"}])
            wait_until(lambda: engine.running, "the first request to hold its blocks")
            leaving = http.client.HTTPConnection("127.0.0.1", running.port, timeout=30)
            leaving.request("POST", "/v1/chat/completions", body=body, headers={"content-type": "application/json"})
            wait_until(lambda: engine.num_waiting == 1, "the second request to wait for blocks")
            leaving.close()
            wait_until(lambda: engine.num_waiting == 0, "the request whose client left to leave the line")
            assert not first.done() and len(engine.running) == 1, "it left the line, it was not admitted"
            assert first.result().choices[0].finish_reason == "length"
        third = client.chat.completions.create(model=MODEL_NAME, max_tokens=60,
                                               messages=[{"role": "user", "content": "long"}])
        assert third.usage is not None and third.usage.completion_tokens == 60
        wait_until(lambda: not engine.running, "every request to end")
        assert engine.pool.num_free_blocks == 8 and engine.stats.num_finished + engine.stats.num_aborted == 2, (
            "only the first and the third ran")
