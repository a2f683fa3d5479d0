"""The server's schema -> grammar-with-a-stack writer (mini_vllm.grammars.schema_grammar): exact, and bounded like
the regex one.

Exactness: every text the grammar derives parses as JSON and validates against its schema
(``jsonschema`` judges), for hypothesis-drawn recursive schemas built from the strict-mode kinds the
regex writer serves; ``json_object``'s texts are JSON objects. Limits: the regex writer's checks and
limits hold, a grammar past ``grammar_symbols`` is refused, and a schema no finite value satisfies
(it requires itself without end) is refused by name.
"""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mini_vllm.grammars.schema_grammar import json_object_sentence, schema_sentence, sentence_grammar
from mini_vllm.grammars.schema_regex import LIMITS, NeedsStack, TooManyStates, UnsupportedSchema, schema_to_regex
from mini_vllm.labtypes.lab09 import Grammar
from mini_vllm.testing.schemas import SUPPORTED
from mini_vllm.testing.stack import earley_accepts

LEAVES = SUPPORTED


def tree(leaf: dict[str, Any], required: bool, high: int | None) -> dict[str, Any]:
    """A node holding a leaf and a list of nodes (``$ref`` to the root)."""
    kids: dict[str, Any] = {"type": "array", "items": {"$ref": "#"}}
    if high is not None:
        kids["maxItems"] = high
    return {"type": "object", "properties": {"v": leaf, "kids": kids}, "required": ["v", "kids"] if required else []}


def linked(leaf: dict[str, Any], via: str) -> dict[str, Any]:
    """A node whose ``next`` is a node or null, through ``$defs`` (or ``definitions``)."""
    node = {"type": "object", "required": ["value", "next"], "properties": {
        "value": leaf, "next": {"anyOf": [{"$ref": f"#/{via}/node"}, {"type": "null"}]}}}
    return {via: {"node": node}, "$ref": f"#/{via}/node"}


RECURSIVE = st.one_of(
    st.builds(tree, LEAVES, st.booleans(), st.sampled_from([None, 1, 3])),
    st.builds(linked, LEAVES, st.sampled_from(["$defs", "definitions"])),
    st.builds(lambda leaf: {"anyOf": [leaf, {"type": "array", "items": {"$ref": "#"}, "minItems": 1, "maxItems": 2}]},
              LEAVES),
)


def heights(grammar: Grammar) -> dict[str, int]:
    """Each nonterminal's shortest derivation, in levels (so a derivation can be steered to end)."""
    height: dict[str, int] = {}
    changed = True
    while changed:
        changed = False
        for rule in grammar.rules:
            if all(grammar.is_lexeme(s) or s in height for s in rule.rhs):
                h = 1 + max((height[s] for s in rule.rhs if not grammar.is_lexeme(s)), default=0)
                if h < height.get(rule.lhs, h + 1):
                    height[rule.lhs] = h
                    changed = True
    return height


def derive(grammar: Grammar, data: st.DataObject, budget: int = 12) -> str:
    """A random text of ``grammar``: random rules until the budget is spent, then the shortest ones; each lexeme
    a string its regex matches (hypothesis draws it)."""
    height = heights(grammar)
    regex = {lexeme.name: lexeme.regex for lexeme in grammar.lexemes}

    def rule_height(rhs: tuple[str, ...]) -> int:
        return max((height[s] for s in rhs if not grammar.is_lexeme(s)), default=0)

    def text(symbol: str, left: int) -> str:
        if grammar.is_lexeme(symbol):
            return data.draw(st.from_regex(regex[symbol], fullmatch=True, alphabet=st.characters(codec="utf-8")))
        rules = [r.rhs for r in grammar.rules if r.lhs == symbol]
        if left <= 0:
            shortest = min(rule_height(rhs) for rhs in rules)
            rules = [rhs for rhs in rules if rule_height(rhs) == shortest]
        rhs = data.draw(st.sampled_from(rules))
        return "".join(text(s, left - 1) for s in rhs)

    return text(grammar.start, budget)


@given(RECURSIVE, st.data())
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_every_text_a_recursive_grammar_derives_validates(schema: dict[str, Any], data: st.DataObject) -> None:
    try:
        grammar = sentence_grammar(schema_sentence(schema))
    except UnsupportedSchema as error:  # refused: fine, if it names a keyword (an empty enum after type checks)
        assert error.keyword and error.where.startswith("#"), error
        return
    text = derive(grammar, data)
    try:
        value = json.loads(text)
    except ValueError as error:
        pytest.fail(f"schema {json.dumps(schema, ensure_ascii=False)}: the grammar derives {text!r}, which is not "
                    f"JSON ({error})")
    errors = list(jsonschema.Draft202012Validator(schema).iter_errors(value))
    assert not errors, (f"schema {json.dumps(schema, ensure_ascii=False)}: the grammar derives {text!r}, which "
                        f"breaks it: {errors[0].message}")


@given(st.data())
@settings(max_examples=40, deadline=None)
def test_json_object_derives_json_objects(data: st.DataObject) -> None:
    text = derive(sentence_grammar(json_object_sentence()), data)
    assert isinstance(json.loads(text), dict), f"json_object derives {text!r}, which is not a JSON object"


TREE = tree({"type": "integer"}, True, None)


@pytest.mark.parametrize("text", ['{"v": 1, "kids": []}',
                                  '{"v": 1, "kids": [{"v": 2, "kids": [{"v": 3, "kids": []}]}]}',
                                  '{"v":1,"kids":[{"v":2,"kids":[]},{"v":3,"kids":[]}]}'])
def test_a_tree_of_any_depth_is_a_sentence(text: str) -> None:
    """Completeness on examples, judged by lark's Earley parser: recursion costs nothing in the grammar."""
    grammar = sentence_grammar(schema_sentence(TREE))
    assert earley_accepts(grammar, text), f"{text!r} is a tree: the grammar must hold it"


def test_a_recursive_schema_needs_the_stack_and_only_then() -> None:
    for schema in (TREE, linked({"type": "string"}, "$defs"), {"anyOf": [{"type": "null"}, {"items": {"$ref": "#"}}]}):
        with pytest.raises(NeedsStack):
            schema_to_regex(schema)
    flat = {"type": "object", "properties": {"a": {"$ref": "#/$defs/a"}}, "$defs": {"a": {"type": "integer"}}}
    assert schema_to_regex(flat), "a $ref that does not recurse is lab-08's regex"


@pytest.mark.parametrize(("schema", "keyword"), [
    ({"$ref": "#"}, "$ref"),
    ({"type": "object", "properties": {"c": {"$ref": "#"}}, "required": ["c"]}, "$ref"),
    ({"$defs": {"x": {"$ref": "#/$defs/x"}}, "$ref": "#/$defs/x"}, "$ref"),
    ({"type": "array", "items": {"$ref": "#"}, "minItems": 1}, "$ref"),
    ({"type": "object", "properties": {"t": {"type": "string", "pattern": "a"}, "c": {"$ref": "#"}}}, "pattern"),
    ({"$ref": "#/$defs/missing"}, "$ref"),
])
def test_a_recursive_schema_it_cannot_serve_is_refused_by_name(schema: dict[str, Any], keyword: str) -> None:
    with pytest.raises(UnsupportedSchema) as caught:
        sentence_grammar(schema_sentence(schema))
    assert caught.value.keyword == keyword, f"refused for {caught.value}, expected the keyword {keyword!r}"


def test_the_limits_hold_for_a_grammar_with_a_stack() -> None:
    wide = {"type": "object", "properties": {f"p{i}": {"type": "array", "items": {"$ref": "#"}, "maxItems": 32}
                                             for i in range(80)}}
    with pytest.raises(UnsupportedSchema) as caught:
        sentence_grammar(schema_sentence(wide))
    assert "limit" in str(caught.value) and f"{LIMITS['grammar_symbols']:,}" in str(caught.value), caught.value
    deep: dict[str, Any] = {"$ref": "#"}
    for _ in range(LIMITS["depth"] + 1):
        deep = {"type": "array", "items": deep}
    with pytest.raises(UnsupportedSchema) as caught:
        sentence_grammar(schema_sentence(deep))
    assert caught.value.keyword == "depth", caught.value


def test_a_ref_is_written_once_however_often_it_recurs() -> None:
    """Linear in the schema: 30 properties that each refer to the root add 30 uses, not 30 copies."""
    def sized(n: int) -> int:
        schema = {"type": "object", "properties": {f"p{i}": {"$ref": "#"} for i in range(n)}}
        grammar = sentence_grammar(schema_sentence(schema))
        return sum(len(rule.rhs) for rule in grammar.rules)
    assert sized(30) - sized(20) == sized(20) - sized(10), "each property adds the same few symbols"


def test_nesting_past_the_regex_size_limit_is_a_few_rules_per_level() -> None:
    """Arrays 5 deep with maxItems 16: the regex would copy each level 16 times; the grammar adds the same 33 rules
    per level (a rule per count of items, 0 to 16, and one per run of them)."""
    def arrays(depth: int) -> dict[str, Any]:
        schema: dict[str, Any] = {"type": "string", "maxLength": 4}
        for _ in range(depth):
            schema = {"type": "array", "items": schema, "maxItems": 16}
        return schema
    with pytest.raises(TooManyStates):
        schema_to_regex(arrays(5))
    sizes = [len(sentence_grammar(schema_sentence(arrays(d))).rules) for d in (3, 4, 5)]
    assert sizes[2] - sizes[1] == sizes[1] - sizes[0] == 33, f"rules at depth 3, 4, 5: {sizes}"
