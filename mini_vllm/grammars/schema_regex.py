"""JSON Schema -> regular expression, checked against published limits before any work.

The server serves OpenAI strict mode's subset exactly, or refuses with a 400 naming the
keyword: every reply that ends with ``stop`` validates against its schema, so a keyword
that cannot be written as a regular expression exactly is refused, never loosened.

What is served: ``type`` (one name, or a list such as ``["string", "null"]``); ``enum`` and
``const`` of any JSON value, each checked against the rest of its schema; ``anyOf``;
``$ref`` to ``#/$defs/...`` (or ``#/definitions/...``) that does not recurse (a recursive one, or ``#``,
raises :class:`NeedsStack`: :mod:`mini_vllm.grammars.schema_grammar` writes it as a grammar with a stack, as it
may a schema whose regex would pass its size limit, :class:`TooManyStates`); objects'
``properties``, ``required`` (each name must be a property) and ``additionalProperties``
(no other property is ever written, which any value of it allows); strings' ``minLength`` /
``maxLength``; integers' ``minimum`` / ``maximum`` / ``exclusiveMinimum`` / ``exclusiveMaximum``;
numbers' whole-number ``minimum`` / ``maximum`` (a bound with a fraction, or an exclusive bound
on a number, is refused: its regular expression would be loose or huge); arrays' ``items``,
``minItems``, ``maxItems``. Property names may hold any character: the grammar writes them
JSON-escaped, as literals.

Limits (:data:`LIMITS`) are checked while the schema is read, and the size of the automaton
it would make is estimated as the regex is written (each position a character can stand at
is a state; a bounded repeat counts its body as many times as it may repeat, so each level of
``items`` doubles it), before any automaton exists. Past a limit: a 400 naming the keyword and
the limit.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from mini_vllm.grammars.regex_pieces import (
    EXPONENT,
    FRACTION,
    UNSIGNED,
    Piece,
    alt,
    integer_range,
    literal,
    number_range,
    seq,
)

# OpenAI's strict mode documents 10 levels of nesting, 5,000 properties, 1,000 enum values and
# 120,000 characters of names and values; this server indexes every grammar in Python, so its
# limits are smaller. Documented in the OpenAPI description and lab-08's README.
LIMITS = {
    "depth": 10,  # objects, arrays and anyOf branches nested in one another
    "properties": 100,  # properties over the whole schema
    "enum": 500,  # enum and const values over the whole schema
    "enum_chars": 15_000,  # characters of those values and of the property names, together
    "maxLength": 256,  # minLength / maxLength of a string
    "maxItems": 32,  # minItems / maxItems of an array
    "anyOf": 16,  # branches of one anyOf or type list
    "grammar_states": 20_000,  # the automaton's estimated size (positions of the regular expression)
    "grammar_symbols": 2_000,  # rules and lexemes of a grammar with a stack (mini_vllm.grammars.schema_grammar)
    "integer_digits": 18,  # digits of an integer bound
}
ANNOTATIONS = frozenset({"title", "description", "$schema", "$id", "$comment", "default", "examples",
                         "deprecated", "readOnly", "writeOnly"})
TYPES = ("object", "array", "string", "integer", "number", "boolean", "null")
KEYWORDS = {
    "object": {"properties", "required", "additionalProperties"},
    "array": {"items", "minItems", "maxItems"},
    "string": {"minLength", "maxLength"},
    "integer": {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"},
    "number": {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"},
}
GENERAL = {"type", "enum", "const", "anyOf", "$ref", "$defs", "definitions"}
KNOWN = ANNOTATIONS | GENERAL | set().union(*KEYWORDS.values())
WHY_NOT = {
    "pattern": "regular expressions in schemas are not supported",
    "format": "formats are not checked by this server's grammar",
    "oneOf": "use anyOf (oneOf's 'exactly one' is not a regular language in general)",
    "allOf": "write the combined schema out",
    "not": "negation is not supported",
}

WS = "[ ]?"  # at most one space around ':' and ',' (as outlines-core writes JSON)
STRING_CHAR = r'([^"\\\x00-\x1F\x7F-\x9F]|\\["\\/bfnrt])'
STRING_CHAR_SIZE = 3


class UnsupportedSchema(ValueError):
    """A schema the server cannot serve exactly: ``keyword`` names what, ``where`` the JSON pointer."""

    def __init__(self, keyword: str, where: str, reason: str = "not supported by this server") -> None:
        super().__init__(f"{keyword!r} at {where}: {reason}")
        self.keyword = keyword
        self.where = where
        self.reason = reason


class NeedsStack(UnsupportedSchema):
    """A recursive ``$ref``: no regular expression holds it (:mod:`mini_vllm.grammars.schema_grammar` writes its
    grammar)."""


class TooManyStates(UnsupportedSchema):
    """The regular expression would pass ``grammar_states``: nesting and counted repeats copy what they hold, where
    a grammar with a stack writes it once (:mod:`mini_vllm.grammars.schema_grammar` may serve it within its own
    limits)."""


def json_text(value: Any) -> str:
    """The one way the grammar writes a constant: JSON with ", " and ": " (as json.dumps does)."""
    return json.dumps(value, ensure_ascii=False, allow_nan=False)


class _Compiler:
    def __init__(self, root: dict[str, Any]) -> None:
        self.root = root
        self.properties = 0
        self.enum_values = 0
        self.chars = 0
        self.size = 0
        self.expanding: list[str] = []  # the $refs being expanded (a repeat is recursion)

    # ---------------------------------------------------------------- limits

    def count(self, what: str, amount: int, where: str, keyword: str) -> None:
        if what == "properties":
            self.properties += amount
            total = self.properties
        elif what == "enum":
            self.enum_values += amount
            total = self.enum_values
        else:
            self.chars += amount
            total = self.chars
        if total > LIMITS[what]:
            raise UnsupportedSchema(keyword, where, f"the schema holds more than this server's limit of "
                                    f"{LIMITS[what]:,} {_NAMES[what]}")

    def bound(self, piece: Piece, where: str, keyword: str) -> Piece:
        if piece.size > LIMITS["grammar_states"]:
            raise TooManyStates(keyword, where, f"the grammar would have about {piece.size:,} states, over this "
                                    f"server's limit of {LIMITS['grammar_states']:,} (each level of items doubles it; "
                                    "maxLength and maxItems multiply it)")
        return piece

    # ---------------------------------------------------------------- schemas

    def schema(self, node: Any, where: str, depth: int) -> Piece:
        if self.read(node, where, depth):  # any value: a regular expression writes any scalar (it cannot nest)
            return Piece(f'("{STRING_CHAR}*"|-?{UNSIGNED}{FRACTION}{EXPONENT}|true|false|null)', 30)
        if "$ref" in node:
            return self.reference(node, where, depth)
        if "anyOf" in node:
            return self.any_of(node, where, depth)
        types = self.types(node, where)
        if "enum" in node or "const" in node:
            return self.constants(node, types, where)
        pieces = [self.typed(node, t, where, depth) for t in types]
        return self.bound(alt(pieces), where, "type")

    def read(self, node: Any, where: str, depth: int) -> bool:
        """Check ``node``'s depth and keywords: True when it allows any value (``true`` or ``{}``)."""
        if depth > LIMITS["depth"]:
            raise UnsupportedSchema("depth", where, f"the schema nests more than this server's limit of "
                                    f"{LIMITS['depth']} levels")
        if node is True or node == {}:
            return True
        if not isinstance(node, dict):
            raise UnsupportedSchema("(schema)", where, f"a schema must be a JSON object, got {_kind(node)}")
        for keyword in node:
            if not isinstance(keyword, str) or keyword not in KNOWN:
                reason = WHY_NOT.get(keyword, "this server does not support this keyword")
                raise UnsupportedSchema(keyword, where, reason)
        for keyword in ("$defs", "definitions"):
            if keyword in node and not (isinstance(node[keyword], dict)
                                        and all(isinstance(v, (dict, bool)) for v in node[keyword].values())):
                raise UnsupportedSchema(keyword, where, "must be an object of schemas")
        return False

    def types(self, node: dict[str, Any], where: str) -> list[str]:
        declared = node.get("type")
        if declared is None:
            implied = [t for t in TYPES if KEYWORDS.get(t, set()) & set(node)]
            if not implied and ("enum" in node or "const" in node):
                return list(TYPES)  # the values are the text, objects and arrays included: nothing nests unbounded
            return implied or ["string", "number", "boolean", "null"]  # any scalar: never unbounded nesting
        names = declared if isinstance(declared, list) else [declared]
        if not names or len(names) > len(TYPES):
            raise UnsupportedSchema("type", where, "must be a type name or a non-empty list of distinct type names")
        for name in names:
            if not isinstance(name, str) or name not in TYPES:
                raise UnsupportedSchema("type", where, f"{_short(name)} is not one of {', '.join(TYPES)}")
        if len(set(names)) != len(names):
            raise UnsupportedSchema("type", where, "lists a type twice")
        # integer is a subset of number: serving both would write the same text two ways
        return [t for t in names if not (t == "integer" and "number" in names)]

    def reference(self, node: dict[str, Any], where: str, depth: int) -> Piece:
        ref, target = self.ref_target(node, where)
        if ref == "#" or ref in self.expanding:
            raise NeedsStack("$ref", where, f"{_short(ref)} is recursive: a regular expression cannot nest without "
                             "bound (a grammar with a stack serves it)")
        self.expanding.append(ref)
        try:
            return self.schema(target, ref, depth + 1)
        finally:
            self.expanding.pop()

    def ref_target(self, node: dict[str, Any], where: str) -> tuple[str, Any]:
        """``node``'s ``$ref`` and the schema it names (``#`` is the root), or the refusal naming what is wrong."""
        ref = node["$ref"]
        others = set(node) - ANNOTATIONS - {"$ref", "$defs", "definitions"}
        if others:
            raise UnsupportedSchema(sorted(others)[0], where, "keywords beside $ref are not supported")
        if not isinstance(ref, str):
            raise UnsupportedSchema("$ref", where, f"must be a string, got {_kind(ref)}")
        if ref == "#":
            return ref, self.root
        match = re.fullmatch(r"#/(\$defs|definitions)/([^/]+)", ref)
        defs = self.root.get(match.group(1)) if match else None
        name = match.group(2).replace("~1", "/").replace("~0", "~") if match else ""
        if not isinstance(defs, dict) or name not in defs:
            raise UnsupportedSchema("$ref", where, f"{_short(ref)} does not name an entry of the root's $defs "
                                    "(only '#', '#/$defs/NAME' and '#/definitions/NAME' are supported)")
        return ref, defs[name]

    def any_of(self, node: dict[str, Any], where: str, depth: int) -> Piece:
        branches = self.branches(node, where)
        pieces = [self.schema(b, f"{where}/anyOf/{i}", depth + 1) for i, b in enumerate(branches)]
        return self.bound(alt(pieces), where, "anyOf")

    def branches(self, node: dict[str, Any], where: str) -> list[Any]:
        """``node``'s ``anyOf`` list, checked."""
        branches = node["anyOf"]
        others = set(node) - ANNOTATIONS - {"anyOf", "$defs", "definitions"}
        if others:
            raise UnsupportedSchema(sorted(others)[0], where, "keywords beside anyOf are not supported")
        if not isinstance(branches, list) or not branches:
            raise UnsupportedSchema("anyOf", where, "must be a non-empty list of schemas")
        if len(branches) > LIMITS["anyOf"]:
            raise UnsupportedSchema("anyOf", where, f"{len(branches)} branches, over this server's limit of "
                                    f"{LIMITS['anyOf']}")
        return branches

    def constants(self, node: dict[str, Any], types: list[str], where: str) -> Piece:
        texts = [json_text(value) for value in self.constant_values(node, types, where)]
        return self.bound(alt([literal(t) for t in texts]), where, "const" if "const" in node else "enum")

    def constant_values(self, node: dict[str, Any], types: list[str], where: str) -> list[Any]:
        """The values of ``enum`` / ``const`` the rest of ``node`` allows, each once (counted against the limits)."""
        keyword = "const" if "const" in node else "enum"
        if keyword == "const":
            values = [node["const"]]
        else:
            values = node["enum"]
            if not isinstance(values, list):
                raise UnsupportedSchema("enum", where, f"must be a list of values, got {_kind(values)}")
        self.count("enum", len(values), where, keyword)
        rest = {k: v for k, v in node.items() if k not in ("enum", "const") and k not in ANNOTATIONS}
        texts: dict[str, Any] = {}
        for value in values:
            try:
                text = json_text(value)
            except (ValueError, TypeError) as error:
                raise UnsupportedSchema(keyword, where, f"holds a value JSON cannot write: {error}") from None
            self.count("enum_chars", len(text), where, keyword)
            if self.satisfies(value, rest, types):
                texts.setdefault(text, value)
        if "const" in node and "enum" in node and json_text(node["const"]) not in {json_text(v) for v in node["enum"]
                                                                                    if _jsonable(v)}:
            texts.clear()
        if not texts:
            raise UnsupportedSchema(keyword, where, "no value satisfies this schema: none of its values is "
                                    f"allowed by the rest of it ({_short(rest)})")
        return list(texts.values())

    def satisfies(self, value: Any, rest: dict[str, Any], types: list[str]) -> bool:
        """Whether ``value`` is allowed by the other keywords beside enum/const (checked by jsonschema)."""
        import jsonschema

        schema = {**rest, "type": types}
        for keyword in ("$defs", "definitions"):
            if keyword in self.root:
                schema[keyword] = self.root[keyword]
        try:
            return bool(jsonschema.Draft202012Validator(schema).is_valid(value))
        except Exception:  # a keyword beside enum with a value jsonschema cannot read: no value is known to pass
            return False

    # ---------------------------------------------------------------- one type

    def typed(self, node: dict[str, Any], kind: str, where: str, depth: int) -> Piece:
        if kind == "object":
            return self.object(node, where, depth)
        if kind == "array":
            return self.array(node, where, depth)
        if kind == "string":
            return self.string(node, where)
        if kind == "integer":
            return self.integer(node, where)
        if kind == "number":
            return self.number(node, where)
        return Piece("(true|false)", 9) if kind == "boolean" else literal("null")

    def object(self, node: dict[str, Any], where: str, depth: int) -> Piece:
        properties, required = self.object_members(node, where)
        members = []
        for name, sub in properties.items():
            key = literal(json_text(name))
            value = self.schema(sub, f"{where}/properties/{_pointer(name)}", depth + 1)
            members.append((seq(key, Piece(WS + ":" + WS, 2), value), name in required))
        body = self.members(members, where)
        return self.bound(seq(Piece(r"\{" + WS, 2), body, Piece(WS + r"\}", 2)), where, "properties")

    def object_members(self, node: dict[str, Any], where: str) -> tuple[dict[str, Any], list[str]]:
        """``node``'s properties and required names, checked (and counted against the limits)."""
        properties = node.get("properties", {})
        if not isinstance(properties, dict):
            raise UnsupportedSchema("properties", where, f"must be an object of schemas, got {_kind(properties)}")
        self.count("properties", len(properties), where, "properties")
        required = node.get("required", [])
        if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
            raise UnsupportedSchema("required", where, "must be a list of property names")
        missing = [r for r in required if r not in properties]
        if missing:
            raise UnsupportedSchema("required", where, f"names {_short(missing[0])}, which is not in properties: "
                                    "no object could have it")
        extra = node.get("additionalProperties", True)
        if not isinstance(extra, (bool, dict)):
            raise UnsupportedSchema("additionalProperties", where, f"must be a boolean or a schema, got {_kind(extra)}")
        for name in properties:
            self.count("enum_chars", len(name), where, "properties")
        return properties, required

    def members(self, members: list[tuple[Piece, bool]], where: str) -> Piece:
        """The properties in order, the optional ones optional, with a comma between any two written."""
        comma = Piece(WS + "," + WS, 2)
        after: Piece = Piece("", 0)  # what may follow once something was written
        first: Piece = Piece("", 0)  # what may come when nothing was written yet
        for member, needed in reversed(members):
            with_it_after = seq(comma, member, after)
            with_it_first = seq(member, after)
            if needed:
                after, first = with_it_after, with_it_first
            else:
                after = Piece(f"({with_it_after.regex})?", with_it_after.size) if with_it_after.regex else after
                first = alt([with_it_first, first]) if first.regex else \
                    Piece(f"({with_it_first.regex})?", with_it_first.size)
            if first.size > LIMITS["grammar_states"]:
                raise TooManyStates("properties", where, f"the grammar would have over this server's "
                                        f"limit of {LIMITS['grammar_states']:,} states (optional properties "
                                        "multiply it: make them required, with a null type for 'absent')")
        return first

    def array(self, node: dict[str, Any], where: str, depth: int) -> Piece:
        low, high = self.array_bounds(node, where)
        item = self.schema(node.get("items", {}), f"{where}/items", depth + 1)
        comma = Piece(WS + "," + WS, 2)
        more = seq(comma, item)
        if high is None:
            rest = Piece(f"({more.regex}){{{max(low - 1, 0)},}}", more.size * max(low, 1))
        else:
            rest = Piece(f"({more.regex}){{{max(low - 1, 0)},{max(high - 1, 0)}}}", more.size * max(high - 1, 0))
        items = seq(item, rest) if high != 0 else Piece("", 0)
        if low == 0 and items.regex:
            items = Piece(f"({items.regex})?", items.size)
        return self.bound(seq(Piece(r"\[" + WS, 2), items, Piece(WS + r"\]", 2)), where, "items")

    def array_bounds(self, node: dict[str, Any], where: str) -> tuple[int, int | None]:
        """``minItems`` and ``maxItems`` (None: no end), checked."""
        low = self.count_keyword(node, "minItems", 0, where)
        high = self.count_keyword(node, "maxItems", None, where)
        if high is not None and low > high:
            raise UnsupportedSchema("minItems", where, f"minItems {low} > maxItems {high}: no array satisfies it")
        return low, high

    def count_keyword(self, node: dict[str, Any], keyword: str, default: int | None, where: str) -> Any:
        value = node.get(keyword, default)
        if value is None:
            return None
        limit = LIMITS["maxItems" if keyword.endswith("Items") else "maxLength"]
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise UnsupportedSchema(keyword, where, f"must be a non-negative integer, got {_short(value)}")
        if value > limit:
            raise UnsupportedSchema(keyword, where, f"{value} is over this server's limit of {limit}")
        return value

    def string(self, node: dict[str, Any], where: str) -> Piece:
        low = self.count_keyword(node, "minLength", 0, where)
        high = self.count_keyword(node, "maxLength", None, where)
        if high is not None and low > high:
            raise UnsupportedSchema("minLength", where, f"minLength {low} > maxLength {high}: no string satisfies it")
        if high is None:
            body = Piece(f"{STRING_CHAR}{{{low},}}", STRING_CHAR_SIZE * max(low, 1))
        else:
            body = Piece(f"{STRING_CHAR}{{{low},{high}}}", STRING_CHAR_SIZE * max(high, 1))
        return self.bound(seq(Piece('"', 1), body, Piece('"', 1)), where, "maxLength")

    def bounds(self, node: dict[str, Any], where: str, integer: bool) -> tuple[int | None, int | None]:
        low: int | None = None
        high: int | None = None
        for keyword in ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"):
            if keyword not in node:
                continue
            value = node[keyword]
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise UnsupportedSchema(keyword, where, f"must be a finite number, got {_short(value)}")
            if abs(value) >= 10 ** LIMITS["integer_digits"]:
                raise UnsupportedSchema(keyword, where, f"{_short(value)} has more than this server's limit of "
                                        f"{LIMITS['integer_digits']} digits")
            if not integer and value != int(value):
                raise UnsupportedSchema(keyword, where, f"{value} on a number: only whole-number bounds can be "
                                        "written exactly as a regular expression")
            if keyword == "minimum":
                bound = math.ceil(value)
            elif keyword == "exclusiveMinimum":
                bound = math.floor(value) + 1
            elif keyword == "maximum":
                bound = math.floor(value)
            else:
                bound = math.ceil(value) - 1
            if keyword.endswith("inimum"):
                low = bound if low is None else max(low, bound)
            else:
                high = bound if high is None else min(high, bound)
        if low is not None and high is not None and low > high:
            raise UnsupportedSchema("minimum", where, f"no {'integer' if integer else 'number'} lies between "
                                    "minimum and maximum")
        return low, high

    def integer(self, node: dict[str, Any], where: str) -> Piece:
        low, high = self.bounds(node, where, integer=True)
        return self.bound(integer_range(low, high), where, "minimum")

    def number(self, node: dict[str, Any], where: str) -> Piece:
        low, high = self.bounds(node, where, integer=False)
        if low is None and high is None:
            return Piece(f"-?{UNSIGNED}{FRACTION}{EXPONENT}", 12)
        return self.bound(number_range(low, high), where, "minimum")


_NAMES = {"properties": "properties", "enum": "enum/const values", "enum_chars": "characters of property names and "
          "enum/const values"}


def _kind(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", int: "an integer",
            float: "a number", type(None): "null"}.get(type(value), type(value).__name__)


def _short(value: Any, limit: int = 60) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str) if _jsonable(value) else repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _jsonable(value: Any) -> bool:
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError, RecursionError):
        return False
    return True


def _pointer(name: str) -> str:
    return name.replace("~", "~0").replace("/", "~1")


def schema_to_regex(schema: Any) -> str:
    """The regular expression of the compact JSON texts ``schema`` allows, or :class:`UnsupportedSchema`."""
    if not isinstance(schema, dict):
        raise UnsupportedSchema("(schema)", "#", f"a schema must be a JSON object, got {_kind(schema)}")
    return _Compiler(schema).schema(schema, "#", 0).regex
