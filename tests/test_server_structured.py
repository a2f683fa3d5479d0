"""Structured outputs served for real: every constrained reply validates, through the official clients.

The server compiles each request's grammar with lab-08's code (the reference here) and samples
the toy model's scoring mode under the mask. The rules under test:

- ``response_format`` ``json_schema`` (strict) and ``json_object`` (Chat), ``text.format`` (Responses),
  ``tool_choice`` ``required`` / a named function (Chat) and ``any`` / ``tool`` (Messages): every reply
  validates against its schema (``jsonschema``), streamed or not, on the byte, bpe and spm families,
  at 1 to 8 tokens per engine step, for several seeds;
- what needs a stack (lab-09 over lab-08): ``json_object`` is any JSON object, nested; a recursive schema
  (``$ref`` to ``#``, or a ``$defs`` entry that refers back) is served, as a reply, a forced call's
  arguments and after a thought; while lab-09 is the starter's stub, ``json_object`` is lab-08's flat
  object and a recursive schema is the 501 naming lab-09's task;
- a schema keyword outside the supported subset is a 400 naming the keyword;
- stop strings and a schema do not mix: a 400 naming ``stop`` (a stop string would cut the JSON).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, Literal

import anthropic
import httpx
import jsonschema
import openai
import pydantic
import pytest

from mini_vllm.labs import load_lab
from mini_vllm.serving import MODEL_NAME, BackgroundServer, build_engine
from mini_vllm.toy_scripts import TREE_JSON

SOLUTION = load_lab("lab-02", "solution")
ASK_JSON = "the weather in Tokyo as json, please"


class Weather(pydantic.BaseModel):
    city: str
    temperature: int
    unit: Literal["celsius", "fahrenheit"]
    note: str


class Node(pydantic.BaseModel):
    """Recursive: the openai client sends it as a $defs entry that refers to itself."""

    v: int
    kids: list[Node]


WEATHER_TOOL_SCHEMA: dict[str, Any] = {
    "type": "object", "properties": {"city": {"type": "string", "maxLength": 8},
                                     "unit": {"enum": ["celsius", "fahrenheit"]}, "note": {"type": "string"}},
    "required": ["city", "unit", "note"], "additionalProperties": False}
OTHER_TOOL_SCHEMA: dict[str, Any] = {"type": "object", "properties": {"people": {"type": "integer"}},
                                     "required": ["people"], "additionalProperties": False}
CHAT_TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": WEATHER_TOOL_SCHEMA}},
              {"type": "function", "function": {"name": "book_table", "parameters": OTHER_TOOL_SCHEMA}}]
# (family, tokens per engine step, seed): every family, k from 1 to 8, three seeds.
SETUPS = [("byte", 1, 0), ("byte", 5, 1), ("bpe", 2, 2), ("bpe", 3, 0), ("bpe", 8, 1), ("spm", 4, 2),
          ("spm", 6, 0), ("bpe", 7, 1)]


@pytest.fixture(scope="module")
def servers() -> Iterator[dict[tuple[str, int, int], BackgroundServer]]:
    started: dict[tuple[str, int, int], BackgroundServer] = {}
    try:
        for family, k, seed in SETUPS:
            server = BackgroundServer(build_engine(family, tokens_per_step=k, seed=seed), pipeline=SOLUTION)
            started[(family, k, seed)] = server.__enter__()
        yield started
    finally:
        for server in started.values():
            server.__exit__(None, None, None)


def openai_client(server: BackgroundServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url, api_key="not-needed", max_retries=0, timeout=120)


def ids(setup: tuple[str, int, int]) -> str:
    return f"{setup[0]}-k{setup[1]}-seed{setup[2]}"


@pytest.mark.parametrize("setup", SETUPS, ids=ids)
def test_chat_parse_validates_whole_and_streamed(servers: dict[tuple[str, int, int], BackgroundServer],
                                                  setup: tuple[str, int, int]) -> None:
    client = openai_client(servers[setup])
    messages: Any = [{"role": "user", "content": ASK_JSON}]
    whole = client.chat.completions.parse(model=MODEL_NAME, messages=messages, response_format=Weather)
    assert whole.choices[0].finish_reason == "stop", whole
    parsed = whole.choices[0].message.parsed
    assert isinstance(parsed, Weather), f"the openai client must parse the reply: {whole.choices[0].message.content!r}"
    jsonschema.validate(json.loads(whole.choices[0].message.content or ""), Weather.model_json_schema())
    with client.chat.completions.stream(model=MODEL_NAME, messages=messages, response_format=Weather) as stream:
        for _ in stream:
            pass
        streamed = stream.get_final_completion().choices[0].message
    assert streamed.parsed == parsed, "streamed or not, the same seed and message give the same reply"


@pytest.mark.parametrize("setup", SETUPS[::3], ids=ids)
def test_json_object_is_a_json_object(servers: dict[tuple[str, int, int], BackgroundServer],
                                      setup: tuple[str, int, int]) -> None:
    reply = openai_client(servers[setup]).chat.completions.create(
        model=MODEL_NAME, messages=[{"role": "user", "content": ASK_JSON}], response_format={"type": "json_object"})
    assert isinstance(json.loads(reply.choices[0].message.content or ""), dict), reply


@pytest.mark.parametrize("choice", ["required", {"type": "function", "function": {"name": "get_weather"}}],
                         ids=["required", "named"])
@pytest.mark.parametrize("setup", SETUPS[::2], ids=ids)
def test_forced_tool_call_matches_its_parameters(servers: dict[tuple[str, int, int], BackgroundServer],
                                                 setup: tuple[str, int, int], choice: Any) -> None:
    client = openai_client(servers[setup])
    messages: Any = [{"role": "user", "content": "what is the weather in Tokyo?"}]
    whole = client.chat.completions.create(model=MODEL_NAME, messages=messages, tools=CHAT_TOOLS,  # type: ignore[arg-type]
                                           tool_choice=choice)
    assert whole.choices[0].finish_reason == "tool_calls", whole
    calls = whole.choices[0].message.tool_calls or []
    assert len(calls) == 1 and calls[0].function.name == "get_weather", calls  # type: ignore[union-attr]
    jsonschema.validate(json.loads(calls[0].function.arguments), WEATHER_TOOL_SCHEMA)  # type: ignore[union-attr]
    chunks = list(client.chat.completions.create(model=MODEL_NAME, messages=messages, tools=CHAT_TOOLS,  # type: ignore[arg-type]
                                                 tool_choice=choice, stream=True))
    arguments = "".join(call.function.arguments or "" for c in chunks if c.choices
                        for call in c.choices[0].delta.tool_calls or [] if call.function)
    assert json.loads(arguments) == json.loads(calls[0].function.arguments), arguments  # type: ignore[union-attr]


def test_thought_is_free_and_the_answer_follows_the_schema(
        servers: dict[tuple[str, int, int], BackgroundServer]) -> None:
    reply = openai_client(servers[("bpe", 3, 0)]).chat.completions.parse(
        model=MODEL_NAME, messages=[{"role": "user", "content": "think json: the weather"}], response_format=Weather,
        extra_body={"chat_template_kwargs": {"enable_thinking": True}})
    message = reply.choices[0].message
    assert "18 degrees" in getattr(message, "reasoning", ""), "the thought is the model's own, unmasked"
    assert isinstance(message.parsed, Weather), message.content


@pytest.mark.parametrize("setup", SETUPS[::3], ids=ids)
def test_responses_text_format_parses(servers: dict[tuple[str, int, int], BackgroundServer],
                                      setup: tuple[str, int, int]) -> None:
    client = openai_client(servers[setup])
    reply = client.responses.parse(model=MODEL_NAME, input=ASK_JSON, text_format=Weather)
    assert isinstance(reply.output_parsed, Weather), reply
    with client.responses.stream(model=MODEL_NAME, input=ASK_JSON, text_format=Weather) as stream:
        for _ in stream:
            pass
        assert stream.get_final_response().output_parsed == reply.output_parsed


@pytest.mark.parametrize("choice", [{"type": "any"}, {"type": "tool", "name": "get_weather"}], ids=["any", "tool"])
@pytest.mark.parametrize("setup", SETUPS[1::3], ids=ids)
def test_anthropic_forced_tool_input_matches_its_schema(servers: dict[tuple[str, int, int], BackgroundServer],
                                                        setup: tuple[str, int, int], choice: Any) -> None:
    client = anthropic.Anthropic(base_url=servers[setup].base_url.removesuffix("/v1"), api_key="not-needed",
                                 max_retries=0, timeout=120)
    tools: Any = [{"name": "get_weather", "input_schema": WEATHER_TOOL_SCHEMA},
                  {"name": "book_table", "input_schema": OTHER_TOOL_SCHEMA}]
    message = client.messages.create(model=MODEL_NAME, max_tokens=400, tools=tools, tool_choice=choice,
                                     messages=[{"role": "user", "content": "what is the weather in Tokyo?"}])
    assert message.stop_reason == "tool_use", message
    uses = [b for b in message.content if b.type == "tool_use"]
    assert len(uses) == 1 and uses[0].name == "get_weather", message.content
    jsonschema.validate(uses[0].input, WEATHER_TOOL_SCHEMA)


BAD = [
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "response_format": {
        "type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object", "properties": {
            "when": {"type": "string", "format": "date"}}}}}}, "response_format.json_schema.schema", "'format'"),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "tools": [
        {"type": "function", "function": {"name": "f", "parameters": {"type": "object", "anyOf": []}}}],
        "tool_choice": "required"}, "tools[0]", "'anyOf'"),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "stop": ["}"], "response_format": {
        "type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object"}}}}, "stop",
     "cannot be combined"),
    ("/v1/responses", {"input": "hi", "text": {"format": {"type": "json_schema", "name": "x", "schema": {
        "type": "string", "pattern": "a"}}}}, None, "'pattern'"),
    ("/v1/messages", {"max_tokens": 50, "messages": [{"role": "user", "content": "hi"}], "tools": [
        {"name": "f", "input_schema": {"type": "object", "oneOf": []}}], "tool_choice": {"type": "any"}}, None,
     "'oneOf'"),
    ("/v1/messages", {"max_tokens": 50, "messages": [{"role": "user", "content": "hi"}], "stop_sequences": ["}"],
      "tools": [{"name": "f", "input_schema": OTHER_TOOL_SCHEMA}], "tool_choice": {"type": "any"}}, None,
     "cannot be combined"),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "response_format": {
        "type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object", "properties": {
            "kids": {"type": "array", "items": {"$ref": "#"}}, "tag": {"type": "string", "pattern": "a"}}}}}},
     "response_format.json_schema.schema", "'pattern'"),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "response_format": {
        "type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object", "properties": {
            f"p{i}": {"type": "array", "items": {"$ref": "#"}, "maxItems": 32} for i in range(80)}}}}},
     "response_format.json_schema.schema", "limit of 2,000 rules and lexemes"),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "response_format": {
        "type": "json_schema", "json_schema": {"name": "x", "schema": {
            "type": "object", "properties": {"next": {"$ref": "#"}}, "required": ["next"]}}}},
     "response_format.json_schema.schema", "no value satisfies"),
]


@pytest.mark.parametrize(("path", "body", "param", "words"), BAD,
                         ids=["keyword-format", "tool-anyOf", "stop-and-schema", "responses-pattern",
                              "messages-oneOf", "messages-stop-and-tool", "recursive-pattern",
                              "recursive-over-the-grammar-limit", "recursive-without-end"])
def test_unsupported_schema_or_stop_with_a_schema_is_a_400_naming_it(
        servers: dict[tuple[str, int, int], BackgroundServer], path: str, body: dict[str, Any], param: str | None,
        words: str) -> None:
    root = servers[SETUPS[0]].base_url.removesuffix("/v1")
    reply = httpx.post(root + path, json={"model": MODEL_NAME, **body}, timeout=60)
    assert reply.status_code == 400, reply.text
    error = reply.json()["error"]
    assert words in error["message"], error
    if param is not None:
        assert (error.get("param") or "").startswith(param), error


TREE: dict[str, Any] = {  # recursive: each node's kids are nodes ($ref to the root)
    "type": "object", "properties": {"v": {"type": "integer"}, "kids": {"type": "array", "items": {"$ref": "#"}}},
    "required": ["v", "kids"], "additionalProperties": False}
LINKED_LIST: dict[str, Any] = {  # recursive through $defs: a node's next is a node or null
    "$defs": {"node": {"type": "object", "properties": {
        "value": {"type": "string", "maxLength": 12}, "next": {"anyOf": [{"$ref": "#/$defs/node"}, {"type": "null"}]}},
        "required": ["value", "next"], "additionalProperties": False}}, "$ref": "#/$defs/node"}
ASK_TREE = "a tree json, please"  # the toy model's scored script: a tree, three levels deep, in prose


def depth(value: Any) -> int:
    """How many objects and arrays nest at the deepest point of ``value``."""
    if isinstance(value, dict):
        return 1 + max((depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((depth(v) for v in value), default=0)
    return 0


@pytest.mark.parametrize("setup", SETUPS[::3], ids=ids)
def test_json_object_is_any_json_object_nested(servers: dict[tuple[str, int, int], BackgroundServer],
                                               setup: tuple[str, int, int]) -> None:
    """Objects inside arrays inside objects: no regular expression holds that; lab-09's parser does."""
    reply = openai_client(servers[setup]).chat.completions.create(
        model=MODEL_NAME, messages=[{"role": "user", "content": ASK_TREE}], response_format={"type": "json_object"})
    assert reply.choices[0].finish_reason == "stop", reply
    value = json.loads(reply.choices[0].message.content or "")
    assert value == TREE_JSON, (
        f"json_object is any JSON object, nested as deep as the reply goes: masked, the model still writes the tree "
        f"it meant ({depth(TREE_JSON)} levels deep); got {value!r}")


@pytest.mark.parametrize("setup", SETUPS[::2], ids=ids)
def test_a_recursive_schema_is_served_and_every_reply_validates(
        servers: dict[tuple[str, int, int], BackgroundServer], setup: tuple[str, int, int]) -> None:
    client = openai_client(servers[setup])
    for schema, ask in ((TREE, ASK_TREE), (LINKED_LIST, ASK_JSON), (TREE, "hello")):
        response_format: Any = {"type": "json_schema", "json_schema": {"name": "x", "strict": True, "schema": schema}}
        messages: Any = [{"role": "user", "content": ask}]
        whole = client.chat.completions.create(model=MODEL_NAME, messages=messages, response_format=response_format)
        assert whole.choices[0].finish_reason == "stop", whole
        value = json.loads(whole.choices[0].message.content or "")
        jsonschema.validate(value, schema)
        streamed = "".join(chunk.choices[0].delta.content or "" for chunk in client.chat.completions.create(
            model=MODEL_NAME, messages=messages, response_format=response_format, stream=True) if chunk.choices)
        assert json.loads(streamed) == value, "streamed or not, the same seed and message give the same reply"
        if ask == ASK_TREE:
            assert value == TREE_JSON, f"masked by the recursive schema, the model still writes its tree: {value!r}"


@pytest.mark.parametrize("setup", SETUPS[1::3], ids=ids)
def test_a_recursive_pydantic_model_parses(servers: dict[tuple[str, int, int], BackgroundServer],
                                           setup: tuple[str, int, int]) -> None:
    client = openai_client(servers[setup])
    reply = client.chat.completions.parse(model=MODEL_NAME, messages=[{"role": "user", "content": ASK_TREE}],
                                          response_format=Node)
    assert reply.choices[0].message.parsed == Node.model_validate(TREE_JSON), reply.choices[0].message.content
    answer = client.responses.parse(model=MODEL_NAME, input=ASK_TREE, text_format=Node)
    assert answer.output_parsed == Node.model_validate(TREE_JSON), answer


def test_a_recursive_schema_after_a_thought_and_as_a_forced_call(
        servers: dict[tuple[str, int, int], BackgroundServer]) -> None:
    client = openai_client(servers[("bpe", 3, 0)])
    reply = client.chat.completions.create(
        model=MODEL_NAME, messages=[{"role": "user", "content": "think json: the weather"}],
        response_format={"type": "json_schema", "json_schema": {"name": "l", "strict": True, "schema": LINKED_LIST}},
        extra_body={"chat_template_kwargs": {"enable_thinking": True}})
    message = reply.choices[0].message
    assert "18 degrees" in getattr(message, "reasoning", ""), "the thought is the model's own, unmasked"
    jsonschema.validate(json.loads(message.content or ""), LINKED_LIST)
    tools: Any = [{"type": "function", "function": {"name": "plant", "parameters": TREE}}, *CHAT_TOOLS]
    call = client.chat.completions.create(model=MODEL_NAME, messages=[{"role": "user", "content": ASK_TREE}],
                                          tools=tools, tool_choice={"type": "function", "function": {"name": "plant"}})
    calls = call.choices[0].message.tool_calls or []
    assert call.choices[0].finish_reason == "tool_calls" and len(calls) == 1, call
    jsonschema.validate(json.loads(calls[0].function.arguments), TREE)  # type: ignore[union-attr]
    anyone = client.chat.completions.create(model=MODEL_NAME, messages=[{"role": "user", "content": "hello"}],
                                            tools=tools, tool_choice="required")
    calls = anyone.choices[0].message.tool_calls or []
    assert anyone.choices[0].finish_reason == "tool_calls" and len(calls) == 1, anyone
    chosen = next(t["function"]["parameters"] for t in tools if t["function"]["name"] == calls[0].function.name)  # type: ignore[union-attr]
    jsonschema.validate(json.loads(calls[0].function.arguments), chosen)  # type: ignore[union-attr]


def test_while_lab09_is_a_stub_json_object_is_flat_and_recursion_a_501(
        servers: dict[tuple[str, int, int], BackgroundServer], monkeypatch: pytest.MonkeyPatch) -> None:
    """The student's release before lab-09: json_object falls back to lab-08's flat object (any JSON object
    whose values are scalars), and a recursive schema says which task of lab-09 serves it."""
    monkeypatch.setenv("LAB_IMPL_09", "starter")
    server = servers[("bpe", 2, 2)]
    reply = openai_client(server).chat.completions.create(
        model=MODEL_NAME, messages=[{"role": "user", "content": ASK_TREE}], response_format={"type": "json_object"})
    value = json.loads(reply.choices[0].message.content or "")
    assert isinstance(value, dict) and depth(value) == 1, f"lab-08's flat object: scalars inside one object: {value!r}"
    refused = httpx.post(server.base_url + "/chat/completions", timeout=60, json={
        "model": MODEL_NAME, "messages": [{"role": "user", "content": ASK_TREE}], "response_format": {
            "type": "json_schema", "json_schema": {"name": "t", "strict": True, "schema": TREE}}})
    assert refused.status_code == 501, refused.text[:300]
    assert "lab-09 task 1" in refused.json()["error"]["message"], refused.json()


def test_without_the_mask_the_same_request_is_not_json(servers: dict[tuple[str, int, int], BackgroundServer]) -> None:
    """The control: no response_format, the scripted reply of the same message is prose around the call."""
    reply = openai_client(servers[("bpe", 3, 0)]).chat.completions.create(
        model=MODEL_NAME, messages=[{"role": "user", "content": ASK_JSON}])
    with pytest.raises(json.JSONDecodeError):
        json.loads(reply.choices[0].message.content or "")


@pytest.mark.slow  # two servers of their own, on real vocabularies: make check
@pytest.mark.parametrize("family", ["mistral", "tekken"])
def test_real_vocabularies_parse_too(family: str) -> None:
    """Mistral 7B's 32,000 pieces and Tekken's 131,072 tokens: the first request waits for the index (seconds)."""
    with BackgroundServer(build_engine(family, tokens_per_step=4), pipeline=SOLUTION) as server:
        reply = openai_client(server).chat.completions.parse(
            model=MODEL_NAME, messages=[{"role": "user", "content": ASK_JSON}], response_format=Weather)
    assert isinstance(reply.choices[0].message.parsed, Weather), reply.choices[0].message.content


def test_thinking_then_a_forced_call(servers: dict[tuple[str, int, int], BackgroundServer]) -> None:
    """The model opens its call without </think>: the thought ends there (lab-06), and the call is masked."""
    server = servers[("bpe", 3, 0)]
    reply = openai_client(server).chat.completions.create(
        model=MODEL_NAME, messages=[{"role": "user", "content": "think then call the weather tool"}],
        tools=CHAT_TOOLS, tool_choice="required",  # type: ignore[arg-type]
        extra_body={"chat_template_kwargs": {"enable_thinking": True}})
    message = reply.choices[0].message
    assert "I should call the tool" in getattr(message, "reasoning", ""), message
    calls = message.tool_calls or []
    assert reply.choices[0].finish_reason == "tool_calls" and len(calls) == 1, reply
    jsonschema.validate(json.loads(calls[0].function.arguments), WEATHER_TOOL_SCHEMA)  # type: ignore[union-attr]
    client = anthropic.Anthropic(base_url=server.base_url.removesuffix("/v1"), api_key="not-needed", max_retries=0,
                                 timeout=120)
    tools: Any = [{"name": "get_weather", "input_schema": WEATHER_TOOL_SCHEMA}]
    message_ = client.messages.create(model=MODEL_NAME, max_tokens=400, tools=tools, tool_choice={"type": "any"},
                                      thinking={"type": "enabled", "budget_tokens": 100},
                                      messages=[{"role": "user", "content": "think then call the weather tool"}])
    kinds = [b.type for b in message_.content]
    assert kinds == ["thinking", "tool_use"] and message_.stop_reason == "tool_use", message_.content
    jsonschema.validate(message_.content[1].input, WEATHER_TOOL_SCHEMA)  # type: ignore[union-attr]


def test_a_blank_lab_08_answers_501_naming_its_task(monkeypatch: pytest.MonkeyPatch) -> None:
    """A student who serves before writing lab-08 gets 501 and the task to write, from the compile worker's
    NotImplementedError, on every schema: never a 500 (the worker's error reply was once misread as one)."""
    monkeypatch.setenv("LAB_IMPL_08", "starter")
    monkeypatch.setenv("LAB_SANDBOX", "0")  # as `make serve` runs it: the student's own file, in the server's process
    with BackgroundServer(build_engine("bpe"), pipeline=load_lab("lab-02", "solution")) as server:
        body = {"model": MODEL_NAME, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 5,
                "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "boolean"}}}}
        reply = httpx.post(server.base_url + "/chat/completions", json=body, timeout=120)
    assert reply.status_code == 501, f"a blank lab-08 must be a 501, not {reply.status_code}: {reply.text[:300]}"
    assert "lab-08 task 1" in reply.json()["error"]["message"], reply.json()
