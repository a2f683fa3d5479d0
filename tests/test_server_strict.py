"""The server as a strict API: every bad request gets a 4xx in OpenAI's error body naming what was wrong,
on a connection that stays usable; every documented field is honoured or refused, never ignored.

One table holds the bad inputs a serving engineer threw at the server (issue 17). Each row is
sent on one raw keep-alive connection, followed by a good request on the same socket, so a
plain-text 500 or a dropped connection cannot hide.
"""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest

from mini_vllm.api.errors import anthropic_error_body
from mini_vllm.labs import load_lab
from mini_vllm.serving import MODEL_NAME, BackgroundServer, build_engine
from mini_vllm.toy_scripts import PARIS_CALL, WEATHER_CALL, WRITE_FILE_CALL

SOLUTION = load_lab("lab-02", "solution")
LIMIT = 256 * 1024  # this module's body size limit (the 100k-deep body is 200 kB)
MAX_MODEL_LEN = 4096
TOOLS = [{"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}
         for name in ("get_weather", "book_table", "write_file")]
HI = [{"role": "user", "content": "hi"}]


@pytest.fixture(scope="module")
def server() -> Iterator[BackgroundServer]:
    engine = build_engine("bpe", max_model_len=MAX_MODEL_LEN)
    with BackgroundServer(engine, pipeline=SOLUTION, max_body_bytes=LIMIT) as running:
        running.app.state.error_shapes["/v1/messages"] = anthropic_error_body  # the hook lab-07's route uses
        yield running


def chat(**fields: Any) -> bytes:
    return json.dumps({"model": MODEL_NAME, "messages": HI, **fields}).encode()


def with_message(content: Any) -> bytes:
    return json.dumps({"model": MODEL_NAME, "messages": [{"role": "user", "content": content}]}).encode()


DEEP = b'{"model": "mini-vllm", "messages": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
# (id, method, path, body, status, param, words in the message)
BAD_INPUTS: list[tuple[str, str, str, bytes, int, str | None, str]] = [
    ("not-json", "POST", "/v1/chat/completions", b'{"model": "mini-vllm", "messages": [', 400, None, "not valid JSON"),
    ("not-an-object", "POST", "/v1/chat/completions", b"[1, 2]", 400, None, "JSON object"),
    ("nested-100k-deep", "POST", "/v1/chat/completions", DEEP, 400, None, "nested too deeply"),
    ("lone-surrogate", "POST", "/v1/chat/completions", with_message("\\ud800").replace(b"\\\\", b"\\"), 400,
     "messages[0].content", "lone surrogate"),
    ("part-text-5", "POST", "/v1/chat/completions", with_message([{"type": "text", "text": 5}]), 400,
     "messages[0].content[0].text", "string"),
    ("part-text-null", "POST", "/v1/chat/completions", with_message([{"type": "text", "text": None}]), 400,
     "messages[0].content[0].text", "string"),
    ("part-text-object", "POST", "/v1/chat/completions", with_message([{"type": "text", "text": {}}]), 400,
     "messages[0].content[0].text", "string"),
    ("image-part", "POST", "/v1/chat/completions",
     with_message([{"type": "image_url", "image_url": {"url": "data:,"}}]), 400, "messages[0].content[0].type", "text"),
    ("no-messages", "POST", "/v1/chat/completions", chat(messages=[]), 400, "messages", "non-empty"),
    ("bad-role", "POST", "/v1/chat/completions", chat(messages=[{"role": "wizard", "content": "hi"}]), 400,
     "messages[0].role", "wizard"),
    ("no-model", "POST", "/v1/chat/completions", json.dumps({"messages": HI}).encode(), 400, "model", "required"),
    ("temperature-hot", "POST", "/v1/chat/completions", chat(temperature="hot"), 400, "temperature", "number"),
    ("temperature-negative", "POST", "/v1/chat/completions", chat(temperature=-3), 400, "temperature", "0"),
    ("top-p-7", "POST", "/v1/chat/completions", chat(top_p=7), 400, "top_p", "1"),
    ("seed-abc", "POST", "/v1/chat/completions", chat(seed="abc"), 400, "seed", "integer"),
    ("max-tokens-0", "POST", "/v1/chat/completions", chat(max_tokens=0), 400, "max_tokens", "greater than or equal"),
    ("max-tokens-true", "POST", "/v1/chat/completions", chat(max_tokens=True), 400, "max_tokens", "integer"),
    ("n-2", "POST", "/v1/chat/completions", chat(n=2), 400, "n", "n=1"),
    ("empty-stop", "POST", "/v1/chat/completions", chat(stop=["ok", ""]), 400, "stop", "empty"),
    ("stop-number", "POST", "/v1/chat/completions", chat(stop=5), 400, "stop", "string"),
    ("unknown-field", "POST", "/v1/chat/completions", chat(temprature=0.5), 400, "temprature", "unknown field"),
    ("include-usage-no", "POST", "/v1/chat/completions", chat(stream=True, stream_options={"include_usage": "no"}),
     400, "stream_options.include_usage", "boolean"),
    ("stream-yes", "POST", "/v1/chat/completions", chat(stream="yes"), 400, "stream", "boolean"),
    ("tools-garbage", "POST", "/v1/chat/completions", chat(tools="all of them"), 400, "tools", "list"),
    ("tool-without-name", "POST", "/v1/chat/completions", chat(tools=[{"type": "function", "function": {}}]), 400,
     "tools[0].function.name", "required"),
    ("tool-choice-garbage", "POST", "/v1/chat/completions", chat(tools=TOOLS, tool_choice="sometimes"), 400,
     "tool_choice", "auto"),
    ("tool-choice-unknown-name", "POST", "/v1/chat/completions",
     chat(tools=TOOLS, tool_choice={"type": "function", "function": {"name": "fly"}}), 400, "tool_choice", "fly"),
    ("tool-choice-required-no-tools", "POST", "/v1/chat/completions", chat(tool_choice="required"), 400,
     "tool_choice", "needs `tools`"),
    ("logprobs", "POST", "/v1/chat/completions", chat(logprobs=True), 400, "logprobs", "not supported"),
    ("top-logprobs", "POST", "/v1/chat/completions", chat(top_logprobs=3), 400, "top_logprobs", "not supported"),
    ("response-format-pattern", "POST", "/v1/chat/completions", chat(response_format={
        "type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "string", "pattern": "a+"}}}), 400,
     "response_format.json_schema.schema", "'pattern'"),
    ("response-format-with-stop", "POST", "/v1/chat/completions", chat(stop=["}"], response_format={
        "type": "json_object"}), 400, "stop", "cannot be combined"),
    ("audio", "POST", "/v1/chat/completions", chat(audio={"voice": "alloy", "format": "wav"}), 400, "audio",
     "not supported"),
    ("logit-bias-word", "POST", "/v1/chat/completions", chat(logit_bias={"hello": 5}), 400, "logit_bias", "token ids"),
    ("unknown-model", "POST", "/v1/chat/completions", chat(model="gpt-9"), 404, "model", "gpt-9"),
    ("completion-prompt-list", "POST", "/v1/completions",
     json.dumps({"model": MODEL_NAME, "prompt": [1, 2, 3]}).encode(), 400, "prompt", "single string"),
    ("completion-echo", "POST", "/v1/completions",
     json.dumps({"model": MODEL_NAME, "prompt": "a", "echo": True}).encode(), 400, "echo", "not supported"),
    ("too-large", "POST", "/v1/chat/completions", with_message("x" * (LIMIT + 1)), 413, None, "limit"),
    ("never-fits", "POST", "/v1/chat/completions", with_message("東京 " * 3000), 400, "messages",
     "maximum context length"),
    ("max-tokens-over-context", "POST", "/v1/chat/completions", chat(max_tokens=MAX_MODEL_LEN), 400, "max_tokens",
     "maximum context length"),
    ("no-such-route", "POST", "/v1/chat/complete", chat(), 404, None, "Invalid URL"),
    ("wrong-method", "GET", "/v1/chat/completions", b"", 405, None, "not allowed"),
    ("no-such-model-card", "GET", "/v1/models/gpt-9", b"", 404, "model", "gpt-9"),
]


def send(connection: http.client.HTTPConnection, method: str, path: str, body: bytes) -> http.client.HTTPResponse:
    connection.request(method, path, body=body or None, headers={"content-type": "application/json"})
    return connection.getresponse()


@pytest.mark.parametrize(("method", "path", "body", "status", "param", "words"),
                         [row[1:] for row in BAD_INPUTS], ids=[row[0] for row in BAD_INPUTS])
def test_bad_input_gets_an_openai_error_and_the_connection_lives(server: BackgroundServer, method: str, path: str,
                                                                 body: bytes, status: int, param: str | None,
                                                                 words: str) -> None:
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    try:
        response = send(connection, method, path, body)
        raw = response.read()
        assert response.status == status, f"expected {status}, got {response.status}: {raw[:300]!r}"
        assert response.getheader("content-type", "").startswith("application/json"), raw[:300]
        error = json.loads(raw)["error"]
        assert set(error) == {"message", "type", "param", "code"}, f"OpenAI's error body has four keys: {error}"
        assert error["param"] == param and words in error["message"], error
        assert response.getheader("connection", "").lower() != "close", "an error must not drop the keep-alive"
        socket_before = connection.sock
        again = send(connection, "GET", "/v1/models", b"")
        assert again.status == 200 and json.loads(again.read())["data"][0]["id"] == MODEL_NAME
        assert connection.sock is socket_before, "the next request must reuse the same connection"
    finally:
        connection.close()


def test_an_unexpected_exception_is_a_500_in_openai_shape_and_the_connection_lives() -> None:
    class Exploding:
        class OutputPipeline:
            def __init__(self, *args: Any, **kwargs: Any) -> None:
                raise RuntimeError("a bug nobody expected")

        ChunkFormatter = SOLUTION.ChunkFormatter

    with BackgroundServer(build_engine("byte"), pipeline=Exploding) as running:  # type: ignore[arg-type]
        connection = http.client.HTTPConnection("127.0.0.1", running.port, timeout=30)
        response = send(connection, "POST", "/v1/chat/completions", chat())
        error = json.loads(response.read())["error"]
        assert response.status == 500 and error["type"] == "server_error" and "a bug nobody expected" in error[
            "message"], error
        assert send(connection, "GET", "/health", b"").status == 200


def test_the_error_shape_is_chosen_per_path(server: BackgroundServer) -> None:
    """A route prefix can have its provider's shape: /v1/messages answers as Anthropic does."""
    response = httpx.post(f"http://127.0.0.1:{server.port}/v1/messages/no_such_route", json={"model": MODEL_NAME})
    assert response.json() == {"type": "error", "error": {"type": "not_found_error",
                                                          "message": response.json()["error"]["message"]}}


def client(server: BackgroundServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url, api_key="not-needed", max_retries=0, timeout=30)


def test_checked_sampling_knobs_are_accepted(server: BackgroundServer) -> None:
    """Knobs a scripted model cannot use are accepted when their values are right."""
    reply = client(server).chat.completions.create(
        model=MODEL_NAME, messages=[{"role": "developer", "content": "be brief"}, *HI], temperature=0.2, top_p=0.9,
        seed=7, frequency_penalty=0.5, presence_penalty=-0.5, logit_bias={"42": -100}, user="u", metadata={"k": "v"},
        store=False, service_tier="auto", logprobs=False, response_format={"type": "text"}, max_completion_tokens=50)
    assert reply.choices[0].message.content


@pytest.mark.parametrize(("options", "parsed"), [
    ({}, False), ({"tools": TOOLS}, True), ({"tools": TOOLS, "tool_choice": "auto"}, True),
    ({"tools": TOOLS, "tool_choice": "none"}, False),
], ids=["no-tools", "tools", "auto", "none"])
def test_tools_and_tool_choice_decide_whether_calls_are_parsed(server: BackgroundServer, options: dict[str, Any],
                                                               parsed: bool) -> None:
    message = client(server).chat.completions.create(
        model=MODEL_NAME, messages=[{"role": "user", "content": "weather"}], **options).choices[0].message
    if parsed:
        assert [c.function.name for c in message.tool_calls or []] == [WEATHER_CALL["name"]]
        assert "<tool_call>" not in (message.content or "")
    else:
        assert not message.tool_calls and "<tool_call>" in (message.content or ""), (
            "no tools offered (or tool_choice none): the model's call text is plain content, as vLLM sends it")


@pytest.mark.parametrize("stream", [False, True])
def test_parallel_tool_calls_false_sends_only_the_first_call(server: BackgroundServer, stream: bool) -> None:
    request: dict[str, Any] = {"model": MODEL_NAME, "messages": [{"role": "user", "content": "two tools"}],
                               "tools": TOOLS, "parallel_tool_calls": False}
    if stream:
        calls: dict[int, str] = {}
        for chunk in client(server).chat.completions.create(**request, stream=True):
            for entry in chunk.choices[0].delta.tool_calls or [] if chunk.choices else []:
                calls[entry.index] = calls.get(entry.index, "") + (entry.function.arguments or "")
        assert list(calls) == [0] and json.loads(calls[0]) == PARIS_CALL["arguments"]
    else:
        message = client(server).chat.completions.create(**request).choices[0].message
        assert [json.loads(c.function.arguments) for c in message.tool_calls or []] == [PARIS_CALL["arguments"]]


def test_default_max_tokens_is_what_is_left_of_the_context(server: BackgroundServer) -> None:
    """vLLM's rule: without max_tokens, the long write-file call completes (256 would cut it)."""
    reply = client(server).chat.completions.create(
        model=MODEL_NAME, messages=[{"role": "user", "content": "write file"}], tools=TOOLS)
    choice = reply.choices[0]
    assert choice.finish_reason == "tool_calls" and reply.usage and reply.usage.completion_tokens > 256
    assert json.loads(choice.message.tool_calls[0].function.arguments) == WRITE_FILE_CALL["arguments"]


@pytest.mark.parametrize("stream", [False, True])
def test_a_stop_string_inside_a_calls_arguments_ends_the_reply_there(server: BackgroundServer, stream: bool) -> None:
    """The rule: the stop wins wherever it falls (vLLM's order: stop strings see the text first).
    The call is cut where the stop matched; the reply finishes with "stop", never a 500."""
    request: dict[str, Any] = {"model": MODEL_NAME, "messages": [{"role": "user", "content": "weather"}],
                               "tools": TOOLS, "stop": ["東京"]}
    if stream:
        arguments, finish = "", None
        for chunk in client(server).chat.completions.create(**request, stream=True):
            for choice in chunk.choices:
                arguments += "".join(e.function.arguments or "" for e in choice.delta.tool_calls or [])
                finish = choice.finish_reason or finish
    else:
        choice = client(server).chat.completions.create(**request).choices[0]
        arguments, finish = choice.message.tool_calls[0].function.arguments, choice.finish_reason
    assert finish == "stop" and "東京" not in arguments and arguments.startswith('{"city": "'), (finish, arguments)


def test_openapi_documents_request_and_response_bodies(server: BackgroundServer) -> None:
    document = httpx.get(f"http://127.0.0.1:{server.port}/openapi.json").json()
    for path, model in [("/v1/chat/completions", "ChatCompletionRequest"), ("/v1/completions", "CompletionRequest")]:
        operation = document["paths"][path]["post"]
        schema = operation["requestBody"]["content"]["application/json"]["schema"]
        assert schema == {"$ref": f"#/components/schemas/{model}"}, schema
        assert {"200", "400", "404", "413", "503"} <= set(operation["responses"])
        assert "text/event-stream" in operation["responses"]["200"]["content"]
    fields = document["components"]["schemas"]["ChatCompletionRequest"]["properties"]
    assert {"temperature", "top_p", "seed", "tools", "tool_choice", "logprobs", "response_format"} <= set(fields)
    assert document["components"]["schemas"]["ChatCompletionRequest"]["additionalProperties"] is False


def test_a_model_card_by_id(server: BackgroundServer) -> None:
    card = client(server).models.retrieve(MODEL_NAME)
    assert card.id == MODEL_NAME and (card.model_extra or {}).get("max_model_len") == MAX_MODEL_LEN
