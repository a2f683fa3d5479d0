"""The server's JSON Schema -> regex writer: exact (every string it allows validates), bounded, never a crash.

Oracle: ``jsonschema`` (a well-kept validator) judges texts drawn at random from the
automaton of the regex; a hostile schema must be refused with :class:`UnsupportedSchema`
naming a keyword, never any other exception.
"""

from __future__ import annotations

import json
import random
from collections import deque
from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mini_vllm.grammars.grammar import regex_to_chars
from mini_vllm.grammars.schema_regex import LIMITS, UnsupportedSchema, schema_to_regex
from mini_vllm.labtypes.lab08 import CharAutomaton
from mini_vllm.testing.schemas import SUPPORTED

# ------------------------------------------------------------------ supported schemas (OpenAI strict mode's kinds)

def random_texts(chars: CharAutomaton, rng: random.Random, count: int) -> list[str]:
    """Strings of the automaton's language, drawn by random walks that head for an accepting state after a while."""
    distance = {s: 0 for s in chars.accepting}
    reverse: dict[int, list[int]] = {}
    for state, moves in enumerate(chars.transitions):
        for _, _, target in moves:
            reverse.setdefault(target, []).append(state)
    queue = deque(chars.accepting)
    while queue:
        state = queue.popleft()
        for source in reverse.get(state, []):
            if source not in distance:
                distance[source] = distance[state] + 1
                queue.append(source)
    texts = []
    for _ in range(count):
        state, out = chars.start, []
        while True:
            moves = list(chars.transitions[state])
            if state in chars.accepting and (not moves or rng.random() < 0.3 or len(out) > 40):
                break
            if len(out) > 40:  # head home: only moves that get closer to an accepting state
                moves = [m for m in moves if distance[m[2]] < distance[state]] or moves
            lo, hi, target = rng.choice(moves)
            code = rng.randint(lo, min(hi, lo + 300))
            if 0xD800 <= code <= 0xDFFF:
                code = 0x41 if lo <= 0x41 <= hi else lo if not 0xD800 <= lo <= 0xDFFF else 0xE000
            out.append(chr(code))
            state = target
        texts.append("".join(out))
    return texts


@given(SUPPORTED, st.integers(0, 2**16))
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_every_string_the_grammar_allows_validates(schema: dict[str, Any], seed: int) -> None:
    """Exactness: each text the regex allows parses as JSON and validates against its schema (jsonschema)."""
    try:
        regex = schema_to_regex(schema)
    except UnsupportedSchema as error:  # refused: fine, if it names a keyword (an empty enum after type checks)
        assert error.keyword and error.where.startswith("#"), error
        return
    chars = regex_to_chars(regex)  # raises if the regex matches nothing: an accepted schema has a value
    for text in random_texts(chars, random.Random(seed), 5):
        try:
            value = json.loads(text)
        except ValueError as error:
            pytest.fail(f"schema {json.dumps(schema, ensure_ascii=False)}: the grammar allows {text!r}, "
                        f"which is not JSON ({error})")
        errors = list(jsonschema.Draft202012Validator(schema).iter_errors(value))
        assert not errors, (f"schema {json.dumps(schema, ensure_ascii=False)}: the grammar allows {text!r}, "
                            f"which breaks it: {errors[0].message}")


@pytest.mark.parametrize(("schema", "keyword"), [
    ({"enum": []}, "enum"),
    ({"type": "integer", "enum": [1.5]}, "enum"),
    ({"type": "integer", "const": "x"}, "const"),
    ({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["b"]}, "required"),
    ({"type": "string", "minLength": 5, "maxLength": 2}, "minLength"),
    ({"type": "string", "pattern": "^a$"}, "pattern"),
    ({"type": "string", "format": "date"}, "format"),
    # recursion: no regex holds it (NeedsStack); the server writes it with a stack (tests/test_schema_grammar.py)
    ({"$defs": {"n": {"type": "object", "properties": {"next": {"$ref": "#/$defs/n"}}}}, "$ref": "#/$defs/n"}, "$ref"),
    ({"type": "number", "minimum": 0.5}, "minimum"),
    ({"type": {"a": 1}}, "type"),
    ({"type": "object", "properties": ["a"]}, "properties"),
    ({"type": "string", "enum": "abc"}, "enum"),
    ({"type": "string", "maxLength": 10_000}, "maxLength"),
    ({"type": "array", "items": {"type": "string"}, "maxItems": 1000}, "maxItems"),
])
def test_a_schema_it_cannot_serve_is_refused_by_name(schema: dict[str, Any], keyword: str) -> None:
    with pytest.raises(UnsupportedSchema) as caught:
        schema_to_regex(schema)
    assert caught.value.keyword == keyword, f"refused for {caught.value}, expected the keyword {keyword!r}"


def nested(kind: str, depth: int, **array: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(depth):
        schema = {"type": "array", "items": schema, **array} if kind == "array" else \
            {"type": "object", "properties": {"a": schema}, "required": ["a"]}
    return schema


@pytest.mark.parametrize(("schema", "keyword"), [
    (nested("array", 4, maxItems=16), "items"),  # within the depth limit, but each level multiplies the grammar
    (nested("array", 20), "depth"),
    (nested("object", 150), "depth"),
    ({"type": "object", "properties": {f"p{i}": {"type": "string", "maxLength": 256} for i in range(40)}},
     "properties"),
    ({"enum": [f"value {i}" for i in range(LIMITS["enum"] + 1)]}, "enum"),
])
def test_a_schema_over_a_limit_is_refused_before_any_automaton(schema: dict[str, Any], keyword: str) -> None:
    with pytest.raises(UnsupportedSchema) as caught:
        schema_to_regex(schema)
    assert caught.value.keyword == keyword, caught.value
    assert "limit" in str(caught.value), f"the refusal must name the limit: {caught.value}"


def test_property_names_are_escaped_so_the_reply_is_json() -> None:
    schema = {"type": "object", "properties": {'a"b': {"type": "integer"}, "a\\b": {"type": "null"},
                                               "c\x01": {"type": "boolean"}}, "required": ['a"b', "a\\b", "c\x01"]}
    chars = regex_to_chars(schema_to_regex(schema))
    for text in random_texts(chars, random.Random(1), 20):
        assert set(json.loads(text)) == {'a"b', "a\\b", "c\x01"}, text


# ------------------------------------------------------------------ hostile schemas: a refusal by name, never a crash

ANYTHING = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(allow_nan=False),
                                  st.text(max_size=5)),
                        lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                st.dictionaries(st.text(max_size=4), inner, max_size=3)), max_leaves=8)
KEYWORDS = st.sampled_from(["type", "properties", "required", "additionalProperties", "items", "enum", "const",
                            "minLength", "maxLength", "minimum", "maximum", "exclusiveMinimum", "minItems", "maxItems",
                            "anyOf", "$ref", "$defs", "definitions", "pattern", "title", "oneOf", "allOf"])
HOSTILE = st.recursive(
    st.dictionaries(KEYWORDS, ANYTHING, max_size=3),
    lambda inner: st.one_of(
        st.builds(lambda s, d: {**d, "type": "object", "properties": {"k": s}}, inner, st.dictionaries(KEYWORDS,
                                                                                                        ANYTHING,
                                                                                                        max_size=2)),
        inner.map(lambda s: {"type": "array", "items": s}),
        st.lists(inner, max_size=3).map(lambda b: {"anyOf": b}),
        inner.map(lambda s: {"$defs": {"x": s}, "$ref": "#/$defs/x"}),
    ), max_leaves=6)


@given(st.one_of(HOSTILE, ANYTHING))
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_a_hostile_schema_is_refused_by_name_never_a_crash(schema: Any) -> None:
    try:
        regex = schema_to_regex(schema)
    except UnsupportedSchema as error:
        assert repr(error.keyword) in str(error), f"the refusal must name the keyword: {error}"
        return
    assert len(regex) < 2_000_000
