"""Every 200 honours its schema: hypothesis-drawn strict-mode schemas through the server, on every vocabulary.

A reply that ends with ``stop`` (Chat) or ``completed`` (Responses), or a forced call that is
complete, validates against its schema (``jsonschema``); a reply cut by the token limit says
so (``length`` / ``incomplete`` with ``max_output_tokens``), and a cut forced call leaves no tag
text in ``content``. The toy model closes what is open once its script cannot go on, so a
constrained reply ends on its own, in bounded tokens.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings

from mini_vllm.labs import load_lab
from mini_vllm.serving import MODEL_NAME, BackgroundServer, build_engine
from mini_vllm.testing.schemas import SUPPORTED

pytestmark = pytest.mark.slow  # five servers, two of them on big vocabularies: make check runs it
SOLUTION = load_lab("lab-02", "solution")
FAMILIES = {"byte": 25, "bpe": 25, "spm": 15, "mistral": 3, "tekken": 2}  # examples each: big vocabularies index slowly


@pytest.fixture(scope="module")
def servers() -> Iterator[dict[str, BackgroundServer]]:
    started: dict[str, BackgroundServer] = {}
    try:
        for family in FAMILIES:
            started[family] = BackgroundServer(build_engine(family, tokens_per_step=3), pipeline=SOLUTION).__enter__()
        yield started
    finally:
        for server in started.values():
            server.__exit__(None, None, None)


def check_chat(reply: httpx.Response, schema: Any) -> None:
    if reply.status_code == 400:  # refused: it must name why (a schema no value satisfies, a compile limit)
        assert reply.json()["error"]["message"], reply.text
        return
    assert reply.status_code == 200, reply.text[:400]
    choice = reply.json()["choices"][0]
    content = choice["message"]["content"] or ""
    assert choice["finish_reason"] in ("stop", "length"), choice
    if choice["finish_reason"] == "stop":
        try:
            value = json.loads(content)
        except ValueError:
            pytest.fail(f"schema {json.dumps(schema)}: finish_reason stop, but the reply {content!r} is not JSON")
        jsonschema.validate(value, schema)


def check_responses(reply: httpx.Response, schema: Any) -> None:
    if reply.status_code == 400:
        return
    assert reply.status_code == 200, reply.text[:400]
    body = reply.json()
    text = "".join(part.get("text", "") for item in body["output"] if item["type"] == "message"
                   for part in item["content"])
    if body["status"] == "completed":
        assert text, f"an empty reply is never completed: {body}"
        jsonschema.validate(json.loads(text), schema)
    else:
        assert body["status"] == "incomplete" and body["incomplete_details"]["reason"] == "max_output_tokens", body


@pytest.mark.parametrize("family", FAMILIES)
def test_every_stop_reply_validates_on_every_vocabulary(servers: dict[str, BackgroundServer], family: str) -> None:
    server = servers[family]

    @given(SUPPORTED)
    @settings(max_examples=FAMILIES[family], deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow])
    def one(schema: dict[str, Any]) -> None:
        with httpx.Client(base_url=server.base_url, timeout=300) as client:
            check_chat(client.post("/chat/completions", json={
                "model": MODEL_NAME, "messages": [{"role": "user", "content": "hello"}], "max_tokens": 200,
                "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": schema}}}), schema)
            check_responses(client.post("/responses", json={
                "model": MODEL_NAME, "input": "the weather as json", "max_output_tokens": 200,
                "text": {"format": {"type": "json_schema", "name": "x", "schema": schema}}}), schema)

    one()


OBJECT = {"type": "object", "properties": {"city": {"type": "string"}, "n": {"type": "integer"}},
          "required": ["city", "n"], "additionalProperties": False}


@pytest.mark.parametrize("family", ["byte", "bpe", "spm"])
def test_a_constrained_reply_to_prose_ends_on_its_own(servers: dict[str, BackgroundServer], family: str) -> None:
    """"hello" has no JSON in its script: the toy model closes what is open instead of writing until max_tokens."""
    with httpx.Client(base_url=servers[family].base_url, timeout=120) as client:
        for extra in ({"response_format": {"type": "json_object"}},
                      {"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": OBJECT}}},
                      {"tools": [{"type": "function", "function": {"name": "f", "parameters": OBJECT}}],
                       "tool_choice": "required"}):
            reply = client.post("/chat/completions", json={
                "model": MODEL_NAME, "messages": [{"role": "user", "content": "hello"}], "max_tokens": 300, **extra})
            assert reply.status_code == 200, reply.text[:300]
            body = reply.json()
            assert body["choices"][0]["finish_reason"] in ("stop", "tool_calls"), (
                f"{list(extra)}: the reply ran to max_tokens ({body['usage']['completion_tokens']} tokens) "
                f"instead of closing what was open: {body['choices'][0]['message']}")
            assert body["usage"]["completion_tokens"] < 150, body["usage"]


@pytest.mark.parametrize("family", ["byte", "bpe"])
def test_a_forced_call_cut_by_max_tokens_leaves_no_tag_in_content(servers: dict[str, BackgroundServer],
                                                                  family: str) -> None:
    with httpx.Client(base_url=servers[family].base_url, timeout=120) as client:
        for max_tokens in (1, 3, 8, 15):
            reply = client.post("/chat/completions", json={
                "model": MODEL_NAME, "messages": [{"role": "user", "content": "the weather in Tokyo"}],
                "max_tokens": max_tokens, "tool_choice": "required",
                "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": OBJECT}}]})
            assert reply.status_code == 200, reply.text[:300]
            choice = reply.json()["choices"][0]
            assert choice["finish_reason"] == "length", choice
            assert "<tool" not in (choice["message"]["content"] or ""), (
                f"max_tokens {max_tokens}: a cut forced call must not leak its tag into content: {choice['message']}")
