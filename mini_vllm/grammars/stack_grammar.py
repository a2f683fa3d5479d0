"""The given half of lab-09: JSON Schema (or ``json_object``) -> a context-free grammar over lexemes.

lab-08 turns a whole schema into one regular expression, so every level of nesting copies the
levels below it, and recursion (``$ref``) cannot be written at all. Here only the *leaves* are
regular: each string, number, literal, key and punctuation mark is a **lexeme** (a regular
expression, read by its own byte automaton from lab-08's machinery), and the structure between
them is a context-free grammar whose nonterminals a parser keeps on a stack.

- a leaf (``string`` with its lengths, ``integer``, ``number``, ``boolean``, ``null``, ``enum``,
  ``const``) is one lexeme, its regex written by outlines-core exactly as lab-08 gets it;
- an object lists its properties in the schema's order, each required one present and each
  optional one present or not, with a comma between two that are present;
- an array of ``items`` is ``[`` then values separated by commas then ``]`` (a left-recursive rule,
  so a parser never holds one item per element);
- ``anyOf`` is one rule per branch; ``$ref`` (``#`` or ``#/$defs/name``) is the nonterminal of
  what it names, so a tree refers to itself and costs nothing more;
- ``json_object`` (and an object or array without ``properties`` / ``items``) is any JSON value of
  that kind, nested as deep as the output goes.

Whitespace: one optional space after ``:`` and after ``,`` (the punctuation lexemes read it), as
``json.dumps`` writes, and nowhere else. A grammar built here is linear in the size of its
schema: 20 levels of arrays are 20 rules more than 1 level, not 2**20 copies.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from typing import Any

from mini_vllm.grammars.grammar import UnsupportedSchema
from mini_vllm.grammars.schema_regex import LIMITS
from mini_vllm.labtypes.lab09 import Grammar, Lexeme, Rule

SUPPORTED_KEYWORDS = frozenset({
    "type", "properties", "required", "additionalProperties", "items", "enum", "const",
    "minLength", "maxLength", "anyOf", "$ref", "$defs",
    "title", "description", "$schema",
})
SUPPORTED_TYPES = frozenset({"object", "string", "integer", "number", "boolean", "null", "array"})
MAX_LENGTH = 256

# The lexemes every JSON grammar may use, by name and regex.
PUNCTUATION = {"LBRACE": r"\{", "RBRACE": r"\}", "LBRACKET": r"\[", "RBRACKET": r"\]",
               "COLON": r":[ ]?", "COMMA": r",[ ]?"}
JSON_OBJECT = "json_object"  # response_format {"type": "json_object"}: any JSON object


def _meta_escape(text: str) -> str:
    """``text`` as a regex that matches only itself (metacharacters escaped, and ``/`` for lark's syntax)."""
    return "".join("\\" + c if c in "\\.^$*+?{}[]|()/-" else c for c in text)


@functools.cache
def _leaf_regex(leaf_json: str) -> str:
    from outlines_core.json_schema import build_regex_from_schema

    return str(build_regex_from_schema(leaf_json))


@functools.cache
def lexeme_automaton(regex: str) -> Any:
    """The byte automaton of a lexeme: outlines-core's DFA of the regex over bytes (lab-08's test kit reads it back)."""
    from mini_vllm.grammars.library import library_grammar

    return library_grammar(regex, ended=True).automaton


def check_schema(schema: Any, where: str = "#") -> None:
    """Raise :class:`UnsupportedSchema` for the first keyword (or value) outside the supported subset."""
    if not isinstance(schema, dict):
        raise UnsupportedSchema("(not an object)", where)
    for keyword, value in schema.items():
        if keyword not in SUPPORTED_KEYWORDS:
            raise UnsupportedSchema(keyword, where)
        if keyword == "type" and value not in SUPPORTED_TYPES:
            raise UnsupportedSchema(f"type: {value}", where)
        if keyword == "additionalProperties" and value is not False:
            raise UnsupportedSchema("additionalProperties (only false is supported)", where)
        if keyword in ("minLength", "maxLength") and (isinstance(value, bool) or not isinstance(value, int)
                                                       or not 0 <= value <= MAX_LENGTH):
            raise UnsupportedSchema(f"{keyword}: {value!r} (an integer 0..{MAX_LENGTH} is supported)", where)
        if keyword == "$ref" and not (value == "#" or (isinstance(value, str) and value.startswith("#/$defs/"))):
            raise UnsupportedSchema(f"$ref: {value!r} (only '#' and '#/$defs/name' are supported)", where)
        if keyword == "anyOf" and (not isinstance(value, list) or not value):
            raise UnsupportedSchema("anyOf (a non-empty list is supported)", where)
    for name, sub in (schema.get("properties") or {}).items():
        check_schema(sub, f"{where}/properties/{name}")
    for name, sub in (schema.get("$defs") or {}).items():
        check_schema(sub, f"{where}/$defs/{name}")
    for k, sub in enumerate(schema.get("anyOf") or []):
        check_schema(sub, f"{where}/anyOf/{k}")
    if "items" in schema:
        check_schema(schema["items"], f"{where}/items")


class _Builder:
    """Writes the rules of one schema, one nonterminal per distinct subschema (so sharing is free)."""

    def __init__(self, root: dict[str, Any] | None) -> None:
        self.root = root
        self.rules: list[Rule] = []
        self.lexemes: dict[str, str] = {}  # regex -> name (the same regex is one lexeme)
        self.names: dict[str, str] = {}  # canonical schema JSON or "$ref" -> symbol
        self.counter = 0

    def lexeme(self, regex: str, name: str) -> str:
        if regex not in self.lexemes:
            self.lexemes[regex] = name if name not in self.lexemes.values() else f"{name}_{len(self.lexemes)}"
        return self.lexemes[regex]

    def fresh(self, kind: str) -> str:
        self.counter += 1
        return f"{kind}_{self.counter}"

    def add(self, lhs: str, *rhs: str) -> None:
        rule = Rule(lhs, tuple(rhs))
        if rule not in self.rules:
            # LIMITS["grammar_symbols"]: rules and lexemes together, refused before any automaton is built
            if len(self.rules) + len(self.lexemes) >= LIMITS["grammar_symbols"]:
                raise UnsupportedSchema("(grammar)", "#", f"the grammar would have more than this server's limit of "
                                        f"{LIMITS['grammar_symbols']:,} rules and lexemes")
            self.rules.append(rule)

    def punct(self, name: str) -> str:
        return self.lexeme(PUNCTUATION[name], name)

    # ------------------------------------------------------------------ any JSON

    def any_value(self) -> str:
        if "any value" in self.names:
            return self.names["any value"]
        value = self.names["any value"] = "value"
        self.add(value, self.any_object())
        self.add(value, self.any_array())
        for leaf in ({"type": "string"}, {"type": "number"}, {"type": "boolean"}, {"type": "null"}):
            self.add(value, self.leaf(leaf))
        return value

    def any_object(self) -> str:
        if "any object" in self.names:
            return self.names["any object"]
        obj = self.names["any object"] = "object"
        members = "members"
        self.add(obj, self.punct("LBRACE"), self.punct("RBRACE"))
        self.add(obj, self.punct("LBRACE"), members, self.punct("RBRACE"))
        pair = [self.leaf({"type": "string"}), self.punct("COLON"), self.any_value()]
        self.add(members, *pair)
        self.add(members, members, self.punct("COMMA"), *pair)
        return obj

    def any_array(self) -> str:
        if "any array" in self.names:
            return self.names["any array"]
        array = self.names["any array"] = "array"
        self.add(array, self.punct("LBRACKET"), self.punct("RBRACKET"))
        self.add(array, self.punct("LBRACKET"), "elements", self.punct("RBRACKET"))
        self.add("elements", self.any_value())
        self.add("elements", "elements", self.punct("COMMA"), self.any_value())
        return array

    # ------------------------------------------------------------------ schemas

    def leaf(self, schema: dict[str, Any]) -> str:
        regex = _leaf_regex(json.dumps(schema, sort_keys=True))
        kind = str(schema.get("type") or ("enum" if "enum" in schema else "const")).upper()
        return self.lexeme(regex, kind)

    def symbol(self, schema: dict[str, Any]) -> str:
        """The symbol (a lexeme's name or a nonterminal) whose strings are exactly ``schema``'s JSON texts."""
        if "$ref" in schema:
            return self.ref(schema["$ref"])
        key = json.dumps(schema, sort_keys=True)
        if key in self.names:
            return self.names[key]
        if "anyOf" in schema:
            name = self.names[key] = self.fresh("any_of")
            for branch in schema["anyOf"]:
                self.add(name, self.symbol(branch))
            return name
        kind = schema.get("type")
        if kind == "object" and "enum" not in schema and "const" not in schema:
            if not schema.get("properties"):
                self.names[key] = self.any_object()
                return self.names[key]
            name = self.names[key] = self.fresh("object")
            self.object_rules(name, schema)
            return name
        if kind == "array" and "enum" not in schema and "const" not in schema:
            if "items" not in schema:
                self.names[key] = self.any_array()
                return self.names[key]
            name = self.names[key] = self.fresh("array")
            items = self.fresh("items")
            self.names[key] = name
            item = self.symbol(schema["items"])
            self.add(name, self.punct("LBRACKET"), self.punct("RBRACKET"))
            self.add(name, self.punct("LBRACKET"), items, self.punct("RBRACKET"))
            self.add(items, item)
            self.add(items, items, self.punct("COMMA"), item)
            return name
        leaf = {k: v for k, v in schema.items() if k not in ("title", "description", "$schema", "$defs")}
        self.names[key] = self.leaf(leaf)
        return self.names[key]

    def ref(self, target: str) -> str:
        if target in self.names:
            return self.names[target]
        if self.root is None:
            raise UnsupportedSchema(f"$ref: {target!r}", "#")
        if target == "#":
            schema = self.root
        else:
            definitions = self.root.get("$defs") or {}
            name = target.removeprefix("#/$defs/")
            if name not in definitions:
                raise UnsupportedSchema(f"$ref: {target!r} (no such definition)", "#")
            schema = definitions[name]
        symbol = self.names[target] = self.fresh("ref")  # named before it is written: a ref may reach itself
        self.add(symbol, self.symbol(schema))
        return symbol

    def object_rules(self, name: str, schema: dict[str, Any],
                     value: Callable[[str, Any], str] | None = None) -> None:
        """Properties in order; ``first_k`` starts at property k with nothing written yet, ``rest_k`` after a comma.

        ``value(key, subschema)`` writes a property's value (default: :meth:`symbol`)."""
        props = list(schema["properties"].items())
        required = set(schema.get("required") or ())
        n = len(props)
        # can_end[k]: every property from k on is optional, so the object may close before property k
        can_end = [all(props[j][0] not in required for j in range(k, n)) for k in range(n + 1)]
        pairs = []
        for key, sub in props:
            key_lexeme = self.lexeme(_meta_escape(json.dumps(key, ensure_ascii=False)), "KEY")
            pairs.append((key_lexeme, self.punct("COLON"), value(key, sub) if value else self.symbol(sub)))
        first = [f"{name}_first{k}" for k in range(n)]
        rest = [f"{name}_rest{k}" for k in range(n)]
        comma = self.punct("COMMA")
        for k in range(n):
            optional = props[k][0] not in required
            for head, lead in ((first[k], ()), (rest[k], (comma,))):
                if can_end[k + 1]:
                    self.add(head, *lead, *pairs[k])
                if k + 1 < n:
                    self.add(head, *lead, *pairs[k], rest[k + 1])
                    if optional:
                        self.add(head, (first if head == first[k] else rest)[k + 1])
        self.add(name, self.punct("LBRACE"), first[0], self.punct("RBRACE"))
        if can_end[0]:
            self.add(name, self.punct("LBRACE"), self.punct("RBRACE"))


def schema_to_grammar(schema: dict[str, Any] | str) -> Grammar:
    """The grammar of ``schema``'s compact JSON texts (``"json_object"``: of any JSON object)."""
    if schema == JSON_OBJECT:
        builder = _Builder(None)
        top = builder.any_object()
    else:
        check_schema(schema)
        assert isinstance(schema, dict)
        builder = _Builder(schema)
        top = builder.ref("#")
    rules = [Rule("start", (top,)), *builder.rules]
    used = {s for rule in rules for s in rule.rhs}
    rules = [r for r in rules if r.lhs == "start" or r.lhs in used]  # never write a rule nothing reaches
    lexemes = tuple(Lexeme(name, regex, lexeme_automaton(regex)) for regex, name in builder.lexemes.items())
    return Grammar(start="start", rules=tuple(rules), lexemes=lexemes)


def grammar_to_lark(grammar: Grammar, *, regexes: bool = True, llguidance: bool = False) -> str:
    """The same grammar in lark's syntax (lark's own parsers, and llguidance's, read it).

    ``regexes=False`` declares the terminals without patterns, for a parser fed lexemes by hand.
    """
    lines = ['%llguidance {"no_forcing": true}'] if llguidance else []
    by_lhs: dict[str, list[str]] = {}
    for rule in grammar.rules:
        by_lhs.setdefault(rule.lhs, []).append(" ".join(rule.rhs))
    for lhs, alternatives in by_lhs.items():
        lines.append(f"{lhs}: " + " | ".join(alternatives))
    for lexeme in grammar.lexemes:
        if regexes:
            pattern = _lark_regex(lexeme.regex) if llguidance else lexeme.regex.replace("/", "\\/")
            lines.append(f"{lexeme.name}: /{pattern}/")
        else:
            lines.append(f"%declare {lexeme.name}")
    return "\n".join(lines) + "\n"


def _lark_regex(regex: str) -> str:
    import llguidance

    return str(llguidance.regex_to_lark(regex))


def grammar_size(grammar: Grammar) -> int:
    """Symbols on the right-hand sides of all rules, plus one per lexeme: how big a grammar is to hold."""
    return sum(len(rule.rhs) for rule in grammar.rules) + len(grammar.lexemes)
