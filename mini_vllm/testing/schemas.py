"""Hypothesis strategies of JSON Schemas in OpenAI strict mode's kinds (what the server serves exactly).

Used by the schema writer's tests and the server's: every value a grammar built from one of
these allows must validate against it (``jsonschema`` judges).
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

NAMES = st.sampled_from(["a", "city", 'a"b', "a\\b", "tab\there", "new\nline", "東京", "🫨", "x/y", "$ref", "", "a b"])
JSON_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-50, 50), st.floats(-10, 10, allow_nan=False).map(
    lambda f: round(f, 2)), st.text(alphabet=st.characters(codec="utf-8"), max_size=6))
JSON_VALUES = st.recursive(JSON_SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=3), inner, max_size=3)), max_leaves=5)


def _bounds(kind: str) -> st.SearchStrategy[dict[str, Any]]:
    whole = st.integers(-120, 120)
    return st.fixed_dictionaries({}, optional={"minimum": whole, "maximum": whole}).filter(
        lambda d: d.get("minimum", -999) <= d.get("maximum", 999)).map(lambda d: {"type": kind, **d})


SCALARS = st.one_of(
    st.just({"type": "boolean"}), st.just({"type": "null"}),
    st.tuples(st.integers(0, 6), st.integers(0, 6)).map(lambda t: {"type": "string", "minLength": min(t),
                                                                     "maxLength": max(t)}),
    st.just({"type": "string"}), _bounds("integer"), _bounds("number"),
    st.just({"type": "integer", "exclusiveMinimum": 3, "exclusiveMaximum": 9}),
    st.lists(JSON_VALUES, min_size=1, max_size=4).map(lambda v: {"enum": v}),
    JSON_VALUES.map(lambda v: {"const": v}),
    st.lists(st.integers(-5, 5), min_size=1, max_size=3).map(lambda v: {"type": "integer", "enum": [*v, 1.5, "x"]}),
    st.sampled_from(["string", "integer", "number", "boolean"]).map(lambda t: {"type": [t, "null"]}),
)


def _object(children: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[dict[str, Any]]:
    def build(props: dict[str, dict[str, Any]], data: st.DataObject) -> dict[str, Any]:
        required = data.draw(st.lists(st.sampled_from(sorted(props)), unique=True)) if props else []
        return {"type": "object", "properties": props, "required": required, "additionalProperties": False}
    return st.builds(build, st.dictionaries(NAMES, children, max_size=3), st.data())


SUPPORTED = st.recursive(SCALARS, lambda inner: st.one_of(
    _object(inner),
    st.tuples(inner, st.integers(0, 2), st.integers(0, 3)).map(
        lambda t: {"type": "array", "items": t[0], "minItems": min(t[1], t[2]), "maxItems": max(t[1], t[2])}),
    st.lists(inner, min_size=1, max_size=3).map(lambda b: {"anyOf": b}),
    inner.map(lambda s: {"$defs": {"thing": s}, "type": "object", "properties": {"t": {"$ref": "#/$defs/thing"}},
                         "required": ["t"]}),
), max_leaves=6)
