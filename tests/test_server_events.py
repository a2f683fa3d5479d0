"""POST /v1/responses and /v1/messages on the real server, through the official clients and an agent loop.

The servers run the reference pipeline (lab-02) and the reference formatters (lab-07) as
``LAB_IMPL`` chooses (``make test`` sets ``solution``). Every stream is also checked by the
grammar acceptors of ``mini_vllm/testing/events.py`` and its channels against lab-02's output
for the same reply (``instructor/replies.py``), at 1 and 3 tokens per step.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import anthropic
import httpx
import openai
import pytest

from instructor.replies import reply_run
from mini_vllm.labs import load_lab
from mini_vllm.serving import MODEL_NAME, BackgroundServer, build_engine
from mini_vllm.testing.events import (
    anthropic_stop_reason,
    check_messages,
    check_responses,
    event_table,
    messages_channels,
    responses_channels,
    sdk_problem,
)
from mini_vllm.toy_scripts import TOOL_RESULT_REPLY, WEATHER_CALL

SERVERS = [("byte", 1), ("bpe", 3)]
# One server per real model's vocabulary (mistral-common's files), for the test of their own below:
# Tekken at two ids per step (its tokens straddle characters), Mistral's SentencePiece at one.
REAL_SERVERS = [("tekken", 2), ("mistral", 1)]
TOOLS = [{"type": "function", "name": "get_weather", "description": "the weather in a city",
          "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}]
ANTHROPIC_TOOLS = [{"name": "get_weather", "input_schema": {"type": "object", "properties": {}}}]


@pytest.fixture(scope="module")
def servers() -> Iterator[dict[tuple[str, int], BackgroundServer]]:
    started = {key: BackgroundServer(build_engine(key[0], tokens_per_step=key[1]),
                                     pipeline=load_lab("lab-02", "solution")).__enter__()
               for key in SERVERS + REAL_SERVERS}
    started[("slow", 1)] = BackgroundServer(build_engine("byte", token_delay_s=0.005)).__enter__()
    for key, running in started.items():
        running.course_key = key  # type: ignore[attr-defined]
    yield started
    with ThreadPoolExecutor() as pool:
        list(pool.map(lambda server: server.__exit__(None, None, None), started.values()))


@pytest.fixture(params=SERVERS, ids=[f"{name}-k{k}" for name, k in SERVERS])
def server(request: pytest.FixtureRequest, servers: dict[tuple[str, int], BackgroundServer]) -> BackgroundServer:
    return servers[request.param]


def family(server: BackgroundServer) -> tuple[str, int]:
    """(tokenizer family, tokens per step) of a server from ``servers``."""
    return server.course_key  # type: ignore[attr-defined, no-any-return]


def openai_client(server: BackgroundServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url, api_key="not-needed", max_retries=0, timeout=30)


def anthropic_client(server: BackgroundServer) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=server.base_url.removesuffix("/v1"), api_key="not-needed", max_retries=0,
                               timeout=30)


def dumped(events: list[Any]) -> list[dict[str, Any]]:
    return [event.model_dump(mode="json", exclude_unset=True) for event in events]


def assert_grammar(found: list[Any], events: list[dict[str, Any]], case: str) -> None:
    assert not found, f"{case}\n" + event_table(events, found[0])


# ------------------------------------------------------------------ OpenAI Responses


@pytest.mark.parametrize("message", ["think then call", "two tools", "japanese", "stop"])
def test_openai_raw_events_follow_the_grammar(server: BackgroundServer, message: str) -> None:
    events = dumped(list(openai_client(server).responses.create(model=MODEL_NAME, input=message, tools=TOOLS,
                                                                stream=True)))
    assert_grammar(check_responses(events), events, f"{message!r} on {family(server)}")
    problems = [(i, sdk_problem("responses", event)) for i, event in enumerate(events)]
    assert not [p for p in problems if p[1]], f"events the SDK's types do not describe: {problems}"
    name, k = family(server)
    run = reply_run(name, message, k)
    said = responses_channels(events)
    assert (said.reasoning, said.text, said.calls) == (run.reasoning, run.text,
                                                       [(c.name, c.arguments) for c in run.calls]), (
        "the stream says exactly what lab-02's pipeline says for the same reply")


def test_openai_stream_helper_rebuilds_the_response(server: BackgroundServer) -> None:
    with openai_client(server).responses.stream(model=MODEL_NAME, input="think then call weather",
                                                tools=TOOLS) as stream:
        final = stream.get_final_response()
    kinds = [item.type for item in final.output]
    assert kinds == ["reasoning", "function_call"], f"a thought then a call: {kinds}"
    call = final.output[1]
    assert call.name == "get_weather" and json.loads(call.arguments) == WEATHER_CALL["arguments"], call


def test_openai_cut_off_reply_is_incomplete_on_the_raw_events(server: BackgroundServer) -> None:
    """get_final_response() raises on response.incomplete, so the raw events are read."""
    events = dumped(list(openai_client(server).responses.create(model=MODEL_NAME, input="long",
                                                                max_output_tokens=16, stream=True)))
    assert_grammar(check_responses(events), events, "'long', max_output_tokens=16")
    last = events[-1]
    assert last["type"] == "response.incomplete", last["type"]
    assert last["response"]["incomplete_details"] == {"reason": "max_output_tokens"}, last["response"]
    assert last["response"]["usage"]["output_tokens"] == 16, last["response"]["usage"]


@pytest.mark.parametrize("message", ["think", "weather", "emoji"])
def test_openai_whole_response_equals_the_stream(server: BackgroundServer, message: str) -> None:
    client = openai_client(server)
    whole = client.responses.create(model=MODEL_NAME, input=message, tools=TOOLS)
    streamed = dumped(list(client.responses.create(model=MODEL_NAME, input=message, tools=TOOLS, stream=True)))
    final = streamed[-1]["response"]
    assert [without_ids(item.model_dump(mode="json", exclude_unset=True)) for item in whole.output] == [
        without_ids(item) for item in final["output"]], "non-streamed output = streamed output (ids aside)"
    assert whole.status == final["status"] == "completed", (whole.status, final["status"])


def without_ids(item: dict[str, Any]) -> dict[str, Any]:
    """An output item without its ids, which differ from one request to the next."""
    return {key: value for key, value in item.items() if key not in ("id", "call_id")}


def test_openai_malformed_call_fails_the_response(server: BackgroundServer) -> None:
    events = dumped(list(openai_client(server).responses.create(model=MODEL_NAME, input="broken tool", tools=TOOLS,
                                                                stream=True)))
    assert_grammar(check_responses(events), events, "'broken tool'")
    assert events[-1]["type"] == "response.failed" and "malformed" in events[-1]["response"]["error"]["message"]
    with pytest.raises(openai.InternalServerError):
        openai_client(server).responses.create(model=MODEL_NAME, input="broken tool", tools=TOOLS)


def test_openai_errors_are_openai_shaped(server: BackgroundServer) -> None:
    root = server.base_url
    for body, field in (({"model": MODEL_NAME, "input": "hi", "bogus": 1}, "bogus"),
                        ({"model": MODEL_NAME}, "input"),
                        ({"model": MODEL_NAME, "input": "hi", "max_output_tokens": 0}, "max_output_tokens"),
                        ({"model": MODEL_NAME, "input": "hi", "previous_response_id": "resp_1"},
                         "previous_response_id")):
        reply = httpx.post(root + "/responses", json=body)
        error = reply.json().get("error", {})
        assert reply.status_code == 400 and field in (error.get("param") or "") + error.get("message", ""), (
            body, reply.status_code, reply.text)
    reply = httpx.post(root + "/responses", json={"model": "gpt-9", "input": "hi"})
    assert reply.status_code == 404 and reply.json()["error"]["code"] == "model_not_found", reply.text


# ------------------------------------------------------------------ Anthropic Messages


@pytest.mark.parametrize("message, thinking", [("think then call", True), ("think then call", False),
                                               ("two tools", False), ("stop", False), ("chinese", False)])
def test_anthropic_raw_events_follow_the_grammar(server: BackgroundServer, message: str, thinking: bool) -> None:
    options: dict[str, Any] = {"thinking": {"type": "enabled", "budget_tokens": 64}} if thinking else {}
    stop = ["STOP"] if message == "stop" else []
    with anthropic_client(server).messages.create(model=MODEL_NAME, max_tokens=1024, stream=True,
                                                  messages=[{"role": "user", "content": message}],
                                                  tools=ANTHROPIC_TOOLS, stop_sequences=stop, **options) as stream:
        events = dumped(list(stream))
    name, k = family(server)
    run = reply_run(name, message, k, stop=tuple(stop), thinking=thinking)
    found = check_messages(events, stop=anthropic_stop_reason(run.finish_reason, run.stop_reason),
                           output_tokens=run.output_tokens)
    assert_grammar(found, events, f"{message!r} on {family(server)}")
    assert not [e for e in events if sdk_problem("messages", e)], "every event is an anthropic.types event"
    said = messages_channels(events)
    assert (said.reasoning, said.text, said.calls) == (run.reasoning if thinking else "", run.text,
                                                       [(c.name, c.arguments) for c in run.calls])


def test_anthropic_stream_helper_accumulates_the_tool_input(server: BackgroundServer) -> None:
    with anthropic_client(server).messages.stream(model=MODEL_NAME, max_tokens=1024, tools=ANTHROPIC_TOOLS,
                                                  messages=[{"role": "user", "content": "think then call"}],
                                                  thinking={"type": "enabled", "budget_tokens": 64}) as stream:
        final = stream.get_final_message()
    assert [block.type for block in final.content] == ["thinking", "tool_use"], final.content
    assert final.content[1].input == WEATHER_CALL["arguments"], final.content[1].input
    assert final.stop_reason == "tool_use", final.stop_reason


@pytest.mark.parametrize("message, stop_reason", [("hello", "end_turn"), ("weather", "tool_use"),
                                                  ("long", "max_tokens")])
def test_anthropic_whole_message_equals_the_stream(server: BackgroundServer, message: str, stop_reason: str) -> None:
    client = anthropic_client(server)
    request: dict[str, Any] = {"model": MODEL_NAME, "max_tokens": 40 if message == "long" else 1024,
                               "messages": [{"role": "user", "content": message}], "tools": ANTHROPIC_TOOLS}
    whole = client.messages.create(**request)
    with client.messages.stream(**request) as stream:
        streamed = stream.get_final_message()
    assert whole.stop_reason == streamed.stop_reason == stop_reason, (whole.stop_reason, streamed.stop_reason)
    assert [without_ids(b.model_dump(exclude_unset=True)) for b in whole.content] == [
        without_ids(b.model_dump(exclude_unset=True)) for b in streamed.content], (
        "non-streamed content = streamed content (ids aside)")


def test_anthropic_errors_are_anthropic_shaped(server: BackgroundServer) -> None:
    with pytest.raises(anthropic.BadRequestError) as raised:
        anthropic_client(server).messages.create(model=MODEL_NAME, messages=[{"role": "user", "content": "hi"}],
                                                 max_tokens=0)
    assert raised.value.body == {"type": "error", "error": {"type": "invalid_request_error",
                                                            "message": raised.value.body["error"]["message"]}}
    root = server.base_url.removesuffix("/v1")
    for body, words in (({"model": MODEL_NAME, "messages": [{"role": "user", "content": "hi"}]}, "max_tokens"),
                        ({"model": MODEL_NAME, "max_tokens": 5, "messages": "hi"}, "messages"),
                        ({"model": MODEL_NAME, "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}],
                          "tool_choice": {"type": "any"}}, "tool_choice")):  # "any" needs tools
        reply = httpx.post(root + "/v1/messages", json=body)
        assert reply.status_code == 400, reply.text
        assert reply.json()["type"] == "error" and reply.json()["error"]["type"] == "invalid_request_error", reply.text
        assert words in reply.json()["error"]["message"], reply.text
    reply = httpx.post(root + "/v1/messages", content=b"{not json")
    assert reply.status_code == 400 and reply.json()["type"] == "error", reply.text


def test_anthropic_malformed_call_is_an_error_event(server: BackgroundServer) -> None:
    with httpx.stream("POST", server.base_url.removesuffix("/v1") + "/v1/messages",
                      json={"model": MODEL_NAME, "max_tokens": 500, "stream": True, "tools": ANTHROPIC_TOOLS,
                            "messages": [{"role": "user", "content": "broken tool"}]}) as reply:
        lines = [line for line in reply.iter_lines() if line]
    assert lines[-2:][0] == "event: error", lines[-2:]
    assert json.loads(lines[-1].removeprefix("data: "))["error"]["type"] == "api_error", lines[-1]


# ------------------------------------------------------------------ the wire, disconnects, multi-turn


def test_every_event_has_its_event_line(server: BackgroundServer) -> None:
    with httpx.stream("POST", server.base_url + "/responses",
                      json={"model": MODEL_NAME, "input": "emoji", "stream": True}) as reply:
        assert reply.headers["content-type"].startswith("text/event-stream"), reply.headers
        blocks = "\n".join(reply.iter_lines()).strip().split("\n\n")
    for block in blocks:
        event, data = block.split("\n")
        assert event == "event: " + json.loads(data.removeprefix("data: "))["type"], block


@pytest.mark.parametrize("path, body", [
    ("/v1/responses", {"input": "long", "stream": True}),
    ("/v1/messages", {"max_tokens": 20000, "stream": True, "messages": [{"role": "user", "content": "long"}]})])
def test_a_client_that_hangs_up_aborts_the_request(servers: dict[tuple[str, int], BackgroundServer], path: str,
                                                   body: dict[str, Any]) -> None:
    slow = servers[("slow", 1)]
    engine, free_before = slow.engine, slow.engine.pool.num_free_blocks
    payload = json.dumps({"model": MODEL_NAME, **body}).encode()
    with socket.create_connection(("127.0.0.1", slow.port), timeout=10) as raw:
        raw.sendall(b"POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                    b"Content-Length: %d\r\n\r\n%s" % (path.encode(), len(payload), payload))
        received = b""
        while received.count(b"event: ") < 6:
            piece = raw.recv(4096)
            assert piece, f"the stream ended early: {received[:300]!r}"
            received += piece
        assert engine.running, "mid-stream, the request is running"
    deadline = time.monotonic() + 10
    while (engine.running or engine.pool.num_free_blocks != free_before) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not engine.running and engine.pool.num_free_blocks == free_before, "the request was not aborted"


def test_a_tool_result_is_quoted_in_every_api(server: BackgroundServer) -> None:
    """Multi-turn: the last input is the tool's result, and the toy model answers by quoting it."""
    result = "Sunny, 21 °C in 東京"
    arguments = json.dumps(WEATHER_CALL["arguments"], ensure_ascii=False)
    reply = openai_client(server).responses.create(model=MODEL_NAME, tools=TOOLS, input=[
        {"role": "user", "content": "weather?"},
        {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": arguments},
        {"type": "function_call_output", "call_id": "call_1", "output": result}])
    assert reply.output_text == TOOL_RESULT_REPLY.format(result), reply.output_text
    message = anthropic_client(server).messages.create(model=MODEL_NAME, max_tokens=500, tools=ANTHROPIC_TOOLS,
                                                       messages=[
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "get_weather",
                                           "input": WEATHER_CALL["arguments"]}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": result}]}])
    assert message.content[0].text == TOOL_RESULT_REPLY.format(result) and message.stop_reason == "end_turn"
    chat = openai_client(server).chat.completions.create(model=MODEL_NAME, messages=[
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function",
                                              "function": {"name": "get_weather", "arguments": arguments}}]},
        {"role": "tool", "tool_call_id": "c1", "content": result}])
    assert chat.choices[0].message.content == TOOL_RESULT_REPLY.format(result), chat.choices[0].message


# ------------------------------------------------------------------ a real agent loop


@pytest.mark.parametrize("kind", ["responses", "chat_completions"])
def test_an_agents_sdk_tool_loop_finishes(server: BackgroundServer, kind: str) -> None:
    """The OpenAI Agents SDK: an Agent with one function tool, through either of its OpenAI models."""
    os.environ["OPENAI_AGENTS_DISABLE_TRACING"] = "1"  # nothing may leave the machine
    import agents

    agents.set_tracing_disabled(True)
    calls: list[dict[str, str]] = []

    @agents.function_tool
    def get_weather(city: str, unit: str, note: str) -> str:
        """The weather in a city."""
        calls.append({"city": city, "unit": unit, "note": note})
        return f"Sunny, 21 degrees in {city}"

    client = openai.AsyncOpenAI(base_url=server.base_url, api_key="not-needed", max_retries=0, timeout=30)
    model_class = agents.OpenAIResponsesModel if kind == "responses" else agents.OpenAIChatCompletionsModel
    agent = agents.Agent(name="weather", instructions="Answer with the tool.", tools=[get_weather],
                         model=model_class(MODEL_NAME, client))
    result = asyncio.run(agents.Runner.run(agent, "What is the weather like?"))
    assert calls == [WEATHER_CALL["arguments"]], f"the tool runs once, with the scripted arguments: {calls}"
    assert result.final_output == TOOL_RESULT_REPLY.format("Sunny, 21 degrees in 東京"), result.final_output


def test_one_call_only_when_parallel_calls_are_off(server: BackgroundServer) -> None:
    reply = openai_client(server).responses.create(model=MODEL_NAME, input="two tools", tools=TOOLS,
                                                   parallel_tool_calls=False)
    calls = [item for item in reply.output if item.type == "function_call"]
    assert len(calls) == 1 and json.loads(calls[0].arguments)["city"] == "Paris", reply.output
    message = anthropic_client(server).messages.create(
        model=MODEL_NAME, max_tokens=1024, tools=ANTHROPIC_TOOLS, messages=[{"role": "user", "content": "two tools"}],
        tool_choice={"type": "auto", "disable_parallel_tool_use": True})
    assert [block.type for block in message.content].count("tool_use") == 1, message.content


@pytest.mark.parametrize("key", REAL_SERVERS, ids=[f"{name}-k{k}" for name, k in REAL_SERVERS])
@pytest.mark.parametrize("message", ["think then call", "japanese", "emoji"])
def test_real_vocabularies_speak_both_event_protocols(servers: dict[tuple[str, int], BackgroundServer],
                                                      key: tuple[str, int], message: str) -> None:
    """`serve --tokenizer mistral|tekken`: both event streams keep the grammar and say what lab-02 says."""
    server = servers[key]
    events = dumped(list(openai_client(server).responses.create(model=MODEL_NAME, input=message, tools=TOOLS,
                                                                stream=True)))
    assert_grammar(check_responses(events), events, f"Responses: {message!r} on {key}")
    run = reply_run(key[0], message, key[1])
    said = responses_channels(events)
    assert (said.reasoning, said.text, said.calls) == (run.reasoning, run.text,
                                                       [(c.name, c.arguments) for c in run.calls]), (
        f"Responses on {key}: the stream says exactly what lab-02's pipeline says for the same reply")
    with anthropic_client(server).messages.create(model=MODEL_NAME, max_tokens=1024, stream=True,
                                                  messages=[{"role": "user", "content": message}],
                                                  tools=ANTHROPIC_TOOLS) as stream:
        events = dumped(list(stream))
    found = check_messages(events, stop=anthropic_stop_reason(run.finish_reason, run.stop_reason),
                           output_tokens=run.output_tokens)
    assert_grammar(found, events, f"Messages: {message!r} on {key}")
    said = messages_channels(events)
    assert (said.text, said.calls) == (run.text, [(c.name, c.arguments) for c in run.calls]), (
        f"Messages on {key}: the stream says exactly what lab-02's pipeline says for the same reply")
