"""Structured outputs through the server on Tekken (issue 41): a new schema's first request, and a token's cost.

- **First request** for a new schema (the server warmed on a boolean schema first: the vocabulary, its
  trie and the decode process exist), wall time to the whole 200, then the same request again (every
  mask cached), beside llguidance's compile and first mask of the same schema (its tokenizer made once).
- **A token**: 200 tokens of the "long" reply, unconstrained, under ``json_object`` and under a schema
  (a string of up to 256 characters), after a first round that computed their masks: milliseconds of
  wall time per token, each request's total over its tokens (HTTP included, the same for all three).
  How long a constrained reply runs before it closes its value is the toy model's noise's choice (seeded
  by the message): on :data:`LONG_PROMPT` both constrained replies stay inside their string to about
  ``max_tokens`` (the token counts are printed), so the figure is a token's, not a request's overhead
  spread over a few tokens.

Goals (issue 41): a first request within 2 s; a constrained token within 1 ms of an unconstrained one.
"""

from __future__ import annotations

import time
from typing import Any

import httpx

from mini_vllm.labs import load_lab
from mini_vllm.serving import MODEL_NAME, BackgroundServer, build_engine

FAMILY = "tekken"


def _strings(count: int, low: int, high: int) -> dict[str, Any]:
    names = [f"s{i}" for i in range(count)]
    return {"type": "object", "properties": {n: {"type": "string", "minLength": low, "maxLength": high} for n in names},
            "required": names, "additionalProperties": False}


def _nested(levels: int) -> dict[str, Any]:
    inner: dict[str, Any] = {"type": "string", "maxLength": 8}
    for _ in range(levels - 1):
        inner = {"type": "array", "items": inner, "maxItems": 2}
    return {"type": "object", "properties": {"a": inner}, "required": ["a"], "additionalProperties": False}


SCHEMAS = {"four strings of 30-40": _strings(4, 30, 40), "three strings of 100-120": _strings(3, 100, 120),
           "10 levels, maxItems 2": _nested(10)}
LONG_PROMPT = "long"  # the "long" script
LONG_STRING = {"type": "object", "properties": {"s": {"type": "string", "maxLength": 256}}, "required": ["s"],
               "additionalProperties": False}


def _body(response_format: dict[str, Any] | None, content: str = "hello", **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"model": MODEL_NAME, "messages": [{"role": "user", "content": content}], **extra}
    if response_format is not None:
        body["response_format"] = response_format
    return body


def _schema(schema: dict[str, Any]) -> dict[str, Any]:
    return {"type": "json_schema", "json_schema": {"name": "x", "strict": True, "schema": schema}}


def _timed(server: BackgroundServer, body: dict[str, Any]) -> tuple[float, dict[str, Any]]:
    started = time.perf_counter()
    reply = httpx.post(server.base_url + "/chat/completions", json=body, timeout=900)
    return time.perf_counter() - started, reply.json() | {"status": reply.status_code}


def _guidance_ms(schema: dict[str, Any]) -> float:
    import json

    import llguidance

    from mini_vllm.testing.structured import _guidance_tokenizer, family_vocabulary

    tokenizer = _guidance_tokenizer(family_vocabulary(FAMILY))
    grammar = llguidance.LLMatcher.grammar_from_json_schema(json.dumps(schema))
    started = time.perf_counter()
    llguidance.LLMatcher(tokenizer, grammar, log_level=0).compute_bitmask()
    return (time.perf_counter() - started) * 1e3


def main() -> list[str]:
    headlines = []
    with BackgroundServer(build_engine(FAMILY), pipeline=load_lab("lab-02", "solution")) as server:
        _timed(server, _body(_schema({"type": "boolean"})))
        print(f"\nstructured outputs through the server on {FAMILY}: a new schema's first request, seconds")
        for name, schema in SCHEMAS.items():
            first, reply = _timed(server, _body(_schema(schema)))
            again, _ = _timed(server, _body(_schema(schema)))
            theirs = _guidance_ms(schema)
            print(f"  {name:26} first {first:7.2f} s ({reply['status']})  again {again:5.2f} s  "
                  f"llguidance compile + first mask {theirs:6.1f} ms")
            met = "met" if first <= 2 and reply["status"] == 200 else "missed"
            headlines.append(f"server on {FAMILY}, new schema ({name}): first request {first:.2f} s "
                             f"({reply['status']}; goal <= 2 s: {met}), "
                             f"again {again:.2f} s, llguidance's compile and first mask {theirs:.1f} ms")
        kinds = {"unconstrained": None, "json_object": {"type": "json_object"}, "schema": _schema(LONG_STRING)}
        per_token: dict[str, float] = {}
        tokens: dict[str, int] = {}
        for name, response_format in kinds.items():
            _timed(server, _body(response_format, LONG_PROMPT, max_tokens=200))  # first visits: masks computed
            seconds, reply = _timed(server, _body(response_format, LONG_PROMPT, max_tokens=200))
            tokens[name] = reply["usage"]["completion_tokens"]
            per_token[name] = seconds * 1e3 / tokens[name]
        print(f"  ms per token (up to 200 tokens of the {LONG_PROMPT!r} reply, masks warm): " +
              ", ".join(f"{name} {ms:.2f} ({tokens[name]} tokens)" for name, ms in per_token.items()))
        for name in ("json_object", "schema"):
            extra = per_token[name] - per_token["unconstrained"]
            headlines.append(f"server on {FAMILY}, a {name} token: {per_token[name]:.2f} ms against "
                             f"{per_token['unconstrained']:.2f} ms unconstrained, +{extra:.2f} ms "
                             f"(goal <= 1 ms: {'met' if extra <= 1 else 'missed'})")
    return headlines


if __name__ == "__main__":
    print("\n".join(main()))
