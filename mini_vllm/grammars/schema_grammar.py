"""JSON Schema -> lab-09's grammar over lexemes, for what no regular expression holds: recursion and any JSON.

The server writes a schema as one regular expression (:mod:`mini_vllm.grammars.schema_regex`, lab-08's path)
whenever it can. Two requests cannot be written so: a recursive ``$ref`` (a tree, a linked list,
``#`` itself), which the regex writer signals with :class:`~mini_vllm.grammars.schema_regex.NeedsStack`, and
``json_object``, any JSON object nested as deep as the reply goes; a third should not be, a schema
whose regex would pass its size estimate (:class:`~mini_vllm.grammars.schema_regex.TooManyStates`: each level
of nesting copies what it holds). For those the server asks lab-09's parser, and this module writes
its grammar: the leaves stay regular (each string, number, literal,
key and punctuation mark is a lexeme) and the nesting between them becomes rules.

A schema is *read* exactly as the regex writer reads it (the same keywords, checks and published
limits, the same regular expression for each leaf, each leaf's size estimate included), and its
structure is written by lab-09's given builder (:mod:`mini_vllm.grammars.stack_grammar`: properties in order,
lists left-recursive, a ``$ref`` a nonterminal named before it is written). What a stack changes:

- a ``$ref`` is written once however often it is used, so recursion and sharing cost nothing;
- ``minItems`` / ``maxItems`` count items in rules (one per item), instead of copying a regex;
- ``true`` / ``{}`` (and a schema with no type and no keyword that implies one) is any JSON value,
  nested, where a regular expression can only write any scalar;
- an ``enum`` / ``const`` value that is an object or an array is written lexeme by lexeme, so it
  never competes with the structure's ``{`` for the longest match (lab-09's rule 2);
- a rule that can never finish (``{"$ref": "#"}`` alone, a required property that requires its own
  kind again) is dropped, and a schema left with nothing is refused: no value satisfies it.

Whitespace is lab-09's: at most one space, after ``:`` and after ``,`` (as ``json.dumps`` writes).
Past :data:`~mini_vllm.grammars.schema_regex.LIMITS`' ``grammar_symbols`` (rules and lexemes together) a
schema is refused before any automaton exists, like every other limit.

A request's grammar is a :data:`Sentence`: alternatives, each a sequence of literal text and
schemas (a forced tool call is its tag and name, the arguments' schema, and the closing tag).
"""

from __future__ import annotations

import json
from typing import Any

from mini_vllm.grammars.regex_pieces import alt, literal
from mini_vllm.grammars.schema_regex import KEYWORDS, TYPES, UnsupportedSchema, _Compiler, _pointer
from mini_vllm.grammars.stack_grammar import JSON_OBJECT, _Builder, _meta_escape
from mini_vllm.labtypes.lab09 import Grammar, Lexeme, Rule

__all__ = ["JSON_OBJECT", "Part", "Sentence", "json_object_sentence", "schema_sentence", "sentence_grammar"]

# One piece of a sentence: ("text", literal text), ("schema", the schema's JSON text), or ("json_object", "").
Part = tuple[str, str]
Sentence = tuple[tuple[Part, ...], ...]  # alternatives, each a sequence of parts


def schema_sentence(schema: Any) -> Sentence:
    """The sentence of one schema's JSON texts (the schema as JSON text, so a sentence is a cache key; its keys
    keep their order, which is the order the properties are written in)."""
    return ((("schema", json.dumps(schema, ensure_ascii=False)),),)


def json_object_sentence() -> Sentence:
    return ((("json_object", ""),),)


class _Writer(_Builder):
    """lab-09's builder, reading each schema with the regex writer's checks and leaves."""

    def __init__(self) -> None:
        super().__init__(None)
        self.reader = _Compiler({})
        self.refs: dict[tuple[int, str], str] = {}  # (which schema of the sentence, its $ref) -> nonterminal
        self.part = 0  # which schema of the sentence is being read

    def leaf(self, schema: dict[str, Any]) -> str:
        """A scalar of any value, as the regex writer writes it (used by lab-09's any-JSON rules)."""
        kind = schema["type"]
        return self.lexeme(self.reader.typed(schema, kind, "#", 0).regex, kind.upper())

    def text(self, text: str) -> str:
        return self.lexeme(literal(text).regex, "TEXT")

    def start_schema(self, schema: Any) -> str:
        """Read a new root (each schema of a sentence has its own ``$defs``): its symbol."""
        self.reader = _Compiler(schema if isinstance(schema, dict) else {})
        self.part += 1
        return self.reference({"$ref": "#"}, "#", -1)  # the root is the ref "#": written once, however it recurs

    # ------------------------------------------------------------------ one schema node

    def symbol_of(self, node: Any, where: str, depth: int) -> str:
        """The symbol whose sentences are exactly ``node``'s JSON texts."""
        if self.reader.read(node, where, depth):
            return self.any_value()
        if "$ref" in node:
            return self.reference(node, where, depth)
        if "anyOf" in node:
            name = self.fresh("any_of")
            for i, branch in enumerate(self.reader.branches(node, where)):
                self.add(name, self.symbol_of(branch, f"{where}/anyOf/{i}", depth + 1))
            return name
        types = self.reader.types(node, where)
        if "enum" in node or "const" in node:
            return self.constants(self.reader.constant_values(node, types, where))
        if "type" not in node and not any(KEYWORDS.get(t, set()) & set(node) for t in TYPES):
            return self.any_value()  # no type, nothing that implies one: any value, nested
        symbols = [self.typed(node, kind, where, depth) for kind in types]
        if len(symbols) == 1:
            return symbols[0]
        name = self.fresh("types")
        for symbol in symbols:
            self.add(name, symbol)
        return name

    def typed(self, node: dict[str, Any], kind: str, where: str, depth: int) -> str:
        if kind == "object":
            return self.object_of(node, where, depth)
        if kind == "array":
            return self.array_of(node, where, depth)
        return self.lexeme(self.reader.typed(node, kind, where, depth).regex, kind.upper())

    def reference(self, node: dict[str, Any], where: str, depth: int) -> str:
        ref, target = self.reader.ref_target(node, where)
        key = (self.part, ref)
        if key not in self.refs:
            symbol = self.refs[key] = self.fresh("ref")  # named before it is written: a ref may reach itself
            self.add(symbol, self.symbol_of(target, ref, depth + 1))
        return self.refs[key]

    def object_of(self, node: dict[str, Any], where: str, depth: int) -> str:
        properties, required = self.reader.object_members(node, where)
        name = self.fresh("object")
        if not properties:  # no other property is ever written: the empty object
            self.add(name, self.punct("LBRACE"), self.punct("RBRACE"))
            return name
        self.object_rules(name, {"properties": properties, "required": required},
                          lambda key, sub: self.symbol_of(sub, f"{where}/properties/{_pointer(key)}", depth + 1))
        return name

    def array_of(self, node: dict[str, Any], where: str, depth: int) -> str:
        """``[`` items ``]`` with ``minItems`` .. ``maxItems`` items: ``run_k`` is k items, left-recursive."""
        low, high = self.reader.array_bounds(node, where)
        item = self.symbol_of(node.get("items", {}), f"{where}/items", depth + 1)
        name = self.fresh("array")
        lbracket, rbracket, comma = self.punct("LBRACKET"), self.punct("RBRACKET"), self.punct("COMMA")
        if low == 0:
            self.add(name, lbracket, rbracket)
        if high == 0:
            return name
        runs = [self.fresh("items")]  # runs[k - 1]: exactly k items
        self.add(runs[0], item)
        for _ in range(2, max(low, 1, high or 0) + 1):
            runs.append(self.fresh("items"))
            self.add(runs[-1], runs[-2], comma, item)
        if high is None:  # at least max(low, 1) items, then any number more
            more = self.fresh("items")
            self.add(more, runs[max(low, 1) - 1])
            self.add(more, more, comma, item)
            self.add(name, lbracket, more, rbracket)
        else:
            for count in range(max(low, 1), high + 1):
                self.add(name, lbracket, runs[count - 1], rbracket)
        return name

    def constants(self, values: list[Any]) -> str:
        """The symbol of exactly these values: scalars in one lexeme (as the regex writer writes them), an object
        or array lexeme by lexeme."""
        scalars = [v for v in values if not isinstance(v, (dict, list))]
        symbols = [self.constant(v) for v in values if isinstance(v, (dict, list))]
        if scalars:
            regex = alt([literal(json.dumps(v, ensure_ascii=False)) for v in scalars]).regex
            symbols.insert(0, self.lexeme(regex, "CONST"))
        if len(symbols) == 1:
            return symbols[0]
        name = self.fresh("enum")
        for symbol in symbols:
            self.add(name, symbol)
        return name

    def constant(self, value: Any) -> str:
        if not isinstance(value, (dict, list)):
            return self.lexeme(literal(json.dumps(value, ensure_ascii=False)).regex, "CONST")
        name = self.fresh("const")
        opening, closing = ("LBRACE", "RBRACE") if isinstance(value, dict) else ("LBRACKET", "RBRACKET")
        rhs = [self.punct(opening)]
        items = value.items() if isinstance(value, dict) else enumerate(value)
        for i, (key, item) in enumerate(items):
            if i:
                rhs.append(self.punct("COMMA"))
            if isinstance(value, dict):
                rhs += [self.lexeme(_meta_escape(json.dumps(key, ensure_ascii=False)), "KEY"), self.punct("COLON")]
            rhs.append(self.constant(item))
        self.add(name, *rhs, self.punct(closing))
        return name


def sentence_grammar(sentence: Sentence) -> Grammar:
    """The grammar of ``sentence``, its lexemes without automata (the compile adds them), or UnsupportedSchema.

    Cheap (linear in the schemas' size, no automaton): the server calls it while it reads the request, so
    a schema it cannot serve is a 400 before any work."""
    writer = _Writer()
    starts = []
    for alternative in sentence:
        rhs = []
        for kind, value in alternative:
            if kind == "text":
                rhs.append(writer.text(value))
            elif kind == "json_object":
                rhs.append(writer.any_object())
            else:
                rhs.append(writer.start_schema(json.loads(value)))
        starts.append(Rule("start", tuple(rhs)))
    rules = _finishing([*starts, *writer.rules])
    if not any(rule.lhs == "start" for rule in rules):
        raise UnsupportedSchema("$ref", "#", "no value satisfies this schema: every value would have to hold "
                                "another of its kind without end (a required property or item that recurses)")
    rules = _reachable(rules)
    used = {symbol for rule in rules for symbol in rule.rhs}
    lexemes = tuple(Lexeme(name, regex, None) for regex, name in writer.lexemes.items() if name in used)
    return Grammar(start="start", rules=tuple(rules), lexemes=lexemes)


def _finishing(rules: list[Rule]) -> list[Rule]:
    """The rules all of whose symbols can finish (derive some text): the others can never end a reply."""
    productive: set[str] = set()
    changed = True
    while changed:
        changed = False
        for rule in rules:
            if rule.lhs not in productive and all(s[:1].isupper() or s in productive for s in rule.rhs):
                productive.add(rule.lhs)
                changed = True
    return [rule for rule in rules if all(s[:1].isupper() or s in productive for s in rule.rhs)]


def _reachable(rules: list[Rule]) -> list[Rule]:
    """The rules ``start`` reaches (a grammar holds no rule nothing uses)."""
    by_lhs: dict[str, list[Rule]] = {}
    for rule in rules:
        by_lhs.setdefault(rule.lhs, []).append(rule)
    seen, agenda = {"start"}, ["start"]
    while agenda:
        for rule in by_lhs.get(agenda.pop(), ()):
            for symbol in rule.rhs:
                if not symbol[:1].isupper() and symbol not in seen:
                    seen.add(symbol)
                    agenda.append(symbol)
    return [rule for rule in rules if rule.lhs in seen]
