"""Structured outputs at the anchors' design (issue 41), through the server; work counted, never timed.

- The vocabulary's trie is built once per vocabulary and process (``token_trie``), shared by every
  grammar and both labs; a compile never reads the vocabulary.
- Masks are computed as the reply goes: a state's mask at its first visit, then looked up, so a reply
  costs the states it visits, not the automaton's; a grammar crosses to the decode process once.
- Exactness: ``const`` / ``enum`` values that are objects or arrays are served without ``"type"``;
  ``strict: true`` holds a schema to OpenAI's strict rules (every property required,
  ``additionalProperties: false``), with OpenAI's 400 naming the object otherwise.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from mini_vllm.labs import load_lab
from mini_vllm.labtypes.lab08 import token_trie
from mini_vllm.serving import MODEL_NAME, BackgroundServer, build_engine
from mini_vllm.testing.structured import family_vocabulary

SOLUTION = load_lab("lab-02", "solution")


def chat(schema: Any, strict: bool = True, content: str = "hello", **extra: Any) -> dict[str, Any]:
    return {"model": MODEL_NAME, "messages": [{"role": "user", "content": content}],
            "response_format": {"type": "json_schema", "json_schema": {"name": "x", "strict": strict,
                                                                        "schema": schema}}, **extra}


@pytest.fixture(scope="module")
def server() -> Iterator[BackgroundServer]:
    with BackgroundServer(build_engine("bpe"), pipeline=SOLUTION) as s:
        yield s


def stats(server: BackgroundServer) -> dict[str, int]:
    return asyncio.run(server.app.state.compile_pool.decoder.stats())  # type: ignore[no-any-return]


def post(server: BackgroundServer, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(server.base_url + "/chat/completions", json=body, timeout=120)


def test_the_trie_is_built_once_per_vocabulary_and_shared() -> None:
    vocab = family_vocabulary("bpe")
    assert token_trie(vocab) is token_trie(vocab), "one vocabulary, one trie: every grammar walks the same one"
    trie = token_trie(vocab)
    assert sorted(trie.in_order) == [i for i, t in enumerate(vocab.tokens) if t is not None], (
        "the trie lists every ordinary token once")
    for node in (0, 1, len(trie) // 2):
        for child in trie.children(node):
            assert trie.path(child) == trie.path(node) + bytes([trie.byte[child]])
        assert all((vocab.tokens[t] or b"").startswith(trie.path(node)) for t in trie.tokens_below(node))


@pytest.mark.parametrize(("schema", "value"), [({"const": {"a": 1}}, {"a": 1}), ({"const": [1, 2]}, [1, 2]),
                                               ({"enum": [{"a": 1}]}, {"a": 1})],
                         ids=["const-object", "const-array", "enum-object"])
def test_const_and_enum_objects_and_arrays_need_no_type(server: BackgroundServer, schema: Any, value: Any) -> None:
    reply = post(server, chat(schema, strict=False))
    assert reply.status_code == 200, f"a const/enum value that is an object or array is served: {reply.text[:300]}"
    assert json.loads(reply.json()["choices"][0]["message"]["content"]) == value


STRICT_OK = {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "integer"}},
             "required": ["a", "b"], "additionalProperties": False}


@pytest.mark.parametrize(("schema", "words"), [
    ({**STRICT_OK, "required": ["a"]}, "Missing 'b'"),
    ({k: v for k, v in STRICT_OK.items() if k != "additionalProperties"}, "'additionalProperties'"),
    ({**STRICT_OK, "properties": {"a": {"type": "object", "properties": {"x": {"type": "string"}},
                                        "required": ["x"]}, "b": {"type": "integer"}}},
     "context=('properties', 'a')"),
], ids=["not-required", "additional-omitted", "nested-object"])
def test_strict_mode_refuses_what_openai_refuses(server: BackgroundServer, schema: Any, words: str) -> None:
    reply = post(server, chat(schema))
    assert reply.status_code == 400, f"strict mode: every property required, additionalProperties false: {reply.text}"
    error = reply.json()["error"]
    assert words in error["message"] and error["param"] == "response_format.json_schema.schema", error
    assert post(server, chat(schema, strict=False)).status_code == 200, "without strict the same schema is served"


def test_a_strict_schema_is_served(server: BackgroundServer) -> None:
    reply = post(server, chat(STRICT_OK))
    assert reply.status_code == 200, reply.text[:300]
    assert set(json.loads(reply.json()["choices"][0]["message"]["content"])) == {"a", "b"}


def test_a_grammar_crosses_to_the_decode_process_once(server: BackgroundServer) -> None:
    decoder = server.app.state.compile_pool.decoder
    schema = {"type": "object", "properties": {"once": {"type": "string", "maxLength": 30}}, "required": ["once"],
              "additionalProperties": False}
    before = decoder.grammars_sent
    for _ in range(4):
        assert post(server, chat(schema, max_tokens=5)).status_code == 200
    assert decoder.grammars_sent - before == 1, (
        f"four requests for one grammar: it crosses to the decode process once, not {decoder.grammars_sent - before}")


def test_masks_are_computed_for_the_states_a_reply_visits_and_kept(server: BackgroundServer) -> None:
    """A string of up to 256 characters is hundreds of automaton states; a reply of 12 tokens visits at most 13,
    and the same request again computes no mask."""
    schema = {"type": "object", "properties": {"long": {"type": "string", "maxLength": 256}}, "required": ["long"],
              "additionalProperties": False}
    before = stats(server)["masks_computed"]
    assert post(server, chat(schema, max_tokens=12)).status_code == 200
    computed = stats(server)["masks_computed"] - before
    assert 0 < computed <= 13, f"12 tokens: at most one mask per state visited (13), computed {computed}"
    assert post(server, chat(schema, max_tokens=12)).status_code == 200
    again = stats(server)["masks_computed"] - before - computed
    assert again == 0, f"the same reply again: every mask is a lookup, yet {again} were computed"
    assert stats(server)["tries"] == 1, "one vocabulary in the decode process: one trie"


HOG = '''
from mini_vllm.labs import load_lab

_solution = load_lab("lab-08", "solution")
globals().update({name: getattr(_solution, name) for name in _solution.__all__})


class TokenMasker(_solution.TokenMasker):
    def mask(self, state):
        if len(self.vocab) > 2:  # not the compile's one-token probe: the decode process's first mask
            hog = bytearray(3 * 1024**3)  # past the decode process's limit
            del hog
        return super().mask(state)
'''


def test_a_reply_past_the_decode_memory_limit_is_a_503_naming_it(tmp_path: Any,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The OS enforces the decode process's limit (RLIMIT_AS): a mask that needs more is a 503 naming the limit,
    and the process lives on to serve the next reply."""
    hog = tmp_path / "hog.py"
    hog.write_text(HOG)
    with BackgroundServer(build_engine("bpe"), pipeline=SOLUTION) as small:
        schema = {"type": "object", "properties": {"m": {"type": "string", "maxLength": 9}}, "required": ["m"],
                  "additionalProperties": False}
        monkeypatch.setenv("LAB_IMPL_08", str(hog))
        reply = post(small, chat(schema, max_tokens=5))
        assert reply.status_code == 503, f"past the decode memory limit: a 503, not {reply.status_code}: {reply.text}"
        assert "1024 MiB" in reply.json()["error"]["message"], reply.json()
        monkeypatch.setenv("LAB_IMPL_08", "solution")
        reply = post(small, chat(schema, max_tokens=5))
        assert reply.status_code == 200, f"the decode process lives on: {reply.text[:300]}"
