"""Lab 09 tests: constrained decoding past regular languages (a parser over lexemes, joined to a lexer over bytes).

Run against your code:  make lab-09
Every graded test is marked with the task it grades. Tasks 2-4 run on the tests' own parser
(lark's LALR(1) parser fed lexeme by lexeme, mini_vllm.testing.stack.LarkParser), never your task 1,
so a bug in your parser costs points in task 1 only. Oracles: llguidance's Earley parser (task 1 step
by step, over the whole prefix each time, and the masks), lark's Earley parser (whole texts), task 4's
definition token by token. Every test of task 1 runs on an ambiguous grammar too (a schema offered
twice in an anyOf), which no LR parser builds a table for.
"""

from __future__ import annotations

import functools
import json
import random
from collections.abc import Sequence
from typing import Any

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mini_vllm import load_tokenizer
from mini_vllm.grammars.stack_grammar import JSON_OBJECT, grammar_size, lexeme_automaton, schema_to_grammar
from mini_vllm.labs import load_lab
from mini_vllm.labtypes.lab08 import token_trie
from mini_vllm.labtypes.lab09 import Grammar, Lexeme, Rule
from mini_vllm.testing.masks import mask_difference, mask_text
from mini_vllm.testing.stack import (
    GuidanceGrammarOracle,
    LarkParser,
    counting_grammar,
    earley_accepts,
    lex_compact,
    lexemes_after,
    lexer_split,
    lexer_state_after,
)
from mini_vllm.testing.structured import family_vocabulary
from mini_vllm.testing.trace import Step, format_trace, quote
from mini_vllm.toy_model import ToyModel

lab = load_lab("lab-09")

TASKS = {
    1: "EarleyParser: push a lexeme, ask what may follow, checkpoint and roll back",
    2: "ByteMatcher: lexer and parser joined byte by byte (a lexeme ends only where the parser takes it)",
    3: "TrieMasker: the token mask by a trie walk with checkpoints",
    4: "LexerCache and SplitMasker: the tokens the lexer alone decides, once per lexer state",
}

WEATHER: dict[str, Any] = {
    "type": "object",
    "properties": {"city": {"type": "string", "maxLength": 8}, "temperature": {"type": "integer"},
                   "unit": {"enum": ["celsius", "fahrenheit"]}, "note": {"type": "string"}},
    "required": ["city", "temperature", "unit"], "additionalProperties": False,
}
TREE: dict[str, Any] = {  # recursive: no regular expression can hold it
    "type": "object", "properties": {"v": {"type": "integer"}, "kids": {"type": "array", "items": {"$ref": "#"}}},
    "required": ["v", "kids"], "additionalProperties": False,
}
THREAD: dict[str, Any] = {  # a comment thread through $defs, with anyOf of distinct kinds
    "type": "object", "properties": {"post": {"$ref": "#/$defs/comment"}}, "required": ["post"],
    "$defs": {"comment": {"type": "object", "properties": {
        "text": {"type": "string", "maxLength": 5}, "score": {"type": "number"},
        "reply": {"anyOf": [{"$ref": "#/$defs/comment"}, {"type": "null"}]}}, "required": ["text", "reply"]}},
}
KINDS: dict[str, Any] = {  # an integer and a number in one object: their lexemes share a prefix
    "type": "object", "properties": {"n": {"type": "integer"}, "x": {"type": "number"}}, "required": ["n", "x"]}


def nested_arrays(depth: int) -> dict[str, Any]:
    """An object holding ``depth`` levels of arrays around a short string: lab-08's regex doubles per level."""
    inner: dict[str, Any] = {"type": "string", "maxLength": 4}
    for _ in range(depth):
        inner = {"type": "array", "items": inner}
    return {"type": "object", "properties": {"a": inner}, "required": ["a"], "additionalProperties": False}


def twice(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` offered twice in an anyOf (the copy under another title, as overlapping models of a union
    come out): every text has two readings. Earley keeps both; an LR parser cannot build its table."""
    body = {k: v for k, v in schema.items() if k != "$defs"}
    defs = {"$defs": schema["$defs"]} if "$defs" in schema else {}
    return {"anyOf": [body, {**body, "title": "the same, again"}], **defs}


SCHEMAS: dict[str, Any] = {"weather": WEATHER, "tree": TREE, "thread": THREAD, "kinds": KINDS,
                           "json_object": JSON_OBJECT, "nested-3": nested_arrays(3)}
SCHEMAS.update({f"{name} twice": twice(SCHEMAS[name]) for name in ("weather", "tree", "thread", "nested-3")})
# Any object, or one whose "v" is any array: `{"v": []}` is both.
SCHEMAS["json_object twice"] = {"anyOf": [{"type": "object"},
                                          {"type": "object", "properties": {"v": {"type": "array"}}}]}


@functools.cache
def grammar_of(name: str) -> Grammar:
    return schema_to_grammar(SCHEMAS[name])


def names(grammar: Grammar, lexemes: Sequence[int] | frozenset[int]) -> str:
    return "{" + ", ".join(sorted(grammar.lexemes[x].name for x in lexemes)) + "}"


# ================================================================ task 1: the parser


def lexeme_walk(name: str, seed: int, steps: int, rollbacks: bool = False) -> tuple[list[Step], str | None]:
    """Push random lexemes into your parser; compare allowed() and accepts() at every step with llguidance's
    answer for the whole sequence pushed so far.

    Some pushes are lexemes the parser cannot take (push must say False and change nothing); with
    ``rollbacks``, some steps roll back to an earlier checkpoint (and the sequence with them).
    """
    grammar = grammar_of(name)
    pushed: list[int]
    marks: list[tuple[Any, int]]  # (a checkpoint, how many lexemes had been pushed)
    mine, pushed = lab.EarleyParser(grammar), []
    rng, table, marks = random.Random(seed), [], []
    every = range(len(grammar.lexemes))
    for _ in range(steps):
        answer = lexemes_after(grammar, pushed)
        assert answer is not None, "the walk pushes only what llguidance allows"
        allowed, whole = answer
        got = (names(grammar, mine.allowed()), mine.accepts())
        want = (names(grammar, allowed), whole)
        if got != want:
            table.append(Step("check", b"", f"{got[0]} whole={got[1]}", f"{want[0]} whole={want[1]}"))
            return table, "allowed() is every lexeme some open rule waits for; accepts() is a whole sentence"
        if rollbacks and marks and rng.random() < 0.2:
            mark, size = marks.pop(rng.randrange(len(marks)))
            del marks[:]
            mine.rollback(mark)
            del pushed[size:]
            table.append(Step("rollback", b"", "", ""))
            continue
        if rollbacks and rng.random() < 0.3:
            marks.append((mine.checkpoint(), len(pushed)))
        refused = [x for x in every if x not in allowed]
        if refused and rng.random() < 0.25:
            bad = frozenset({rng.choice(refused)})
            took = mine.push(bad)
            table.append(Step("push", names(grammar, bad), f"took={took}", "took=False"))
            if took:
                return table, f"push({names(grammar, bad)}): no open rule waits for it, so push says False"
            continue
        if not allowed:
            break
        lexeme = rng.choice(sorted(allowed))
        took = mine.push(frozenset({lexeme}))
        pushed.append(lexeme)
        table.append(Step("push", names(grammar, [lexeme]), f"took={took}", "took=True"))
        if not took:
            return table, f"push({names(grammar, [lexeme])}) must be taken: the parser allowed it"
    return table, None


@pytest.mark.task(1)
@pytest.mark.parametrize("name", ["weather", "tree", "thread", "json_object", "nested-3"])
def test_parser_agrees_with_llguidance_step_by_step(name: str) -> None:
    for schema in (name, f"{name} twice"):
        for seed in range(2):
            table, problem = lexeme_walk(schema, seed, 50)
            assert problem is None, format_trace(table, f"schema {schema!r}, seed {seed}: {problem}",
                                                 columns=("yours", "llguidance's"), inputs=("call", "lexemes"))


@pytest.mark.task(1)
@pytest.mark.parametrize("name", ["tree", "json_object"])
def test_rollback_returns_to_the_checkpoint(name: str) -> None:
    for schema in (name, f"{name} twice"):
        for seed in range(3):
            table, problem = lexeme_walk(schema, seed, 60, rollbacks=True)
            assert problem is None, format_trace(
                table, f"schema {schema!r}, seed {seed}: after rollback(mark) the parser is as it was at "
                f"checkpoint(); {problem}", columns=("yours", "llguidance's"), inputs=("call", "lexemes"))


@pytest.mark.task(1)
@pytest.mark.parametrize("name", ["tree twice", "json_object twice"])  # ambiguous, as every task-1 test's grammar
def test_rollback_to_the_first_checkpoint_starts_over(name: str) -> None:
    """A checkpoint taken before any lexeme is a checkpoint like any other: rolling back to it is a new parser."""
    grammar = grammar_of(name)
    pushed: list[int]
    parser, pushed = lab.EarleyParser(grammar), []
    mark = parser.checkpoint()
    for _ in range(4):
        allowed, _ = lexemes_after(grammar, pushed) or (frozenset(), False)
        if not allowed:
            break
        lexeme = min(allowed)
        assert parser.push(frozenset({lexeme})), f"push({names(grammar, [lexeme])}) must be taken: it is allowed"
        pushed.append(lexeme)
    assert len(pushed) >= 2, "test bug: the walk must push a few lexemes before it rolls back"
    parser.rollback(mark)
    allowed, whole = lexemes_after(grammar, []) or (frozenset(), False)
    got, want = (names(grammar, parser.allowed()), parser.accepts()), (names(grammar, allowed), whole)
    assert got == want, (
        f"{name}: after rollback to the checkpoint taken before the first lexeme, the parser is as new: allowed() "
        f"{want[0]}, accepts() {want[1]} (llguidance); you have {got[0]}, {got[1]}")


def start_after_a_rule() -> Grammar:
    """start -> pair B | twin B; pair -> A; twin -> A (ambiguous: A is a pair or a twin). After A both rules are
    complete from the first lexeme, and start is not."""
    lexemes = tuple(Lexeme(name, regex, lexeme_automaton(regex)) for name, regex in (("A", "a"), ("B", "b")))
    rules = (Rule("start", ("pair", "B")), Rule("start", ("twin", "B")), Rule("pair", ("A",)), Rule("twin", ("A",)))
    return Grammar(start="start", rules=rules, lexemes=lexemes)


@pytest.mark.task(1)
def test_only_the_start_rule_makes_a_sentence() -> None:
    grammar = start_after_a_rule()
    parser = lab.EarleyParser(grammar)
    for pushed in ([0], [0, 1]):
        assert parser.push(frozenset({pushed[-1]})), f"push({names(grammar, pushed[-1:])}) must be taken"
        _, whole = lexemes_after(grammar, pushed) or (frozenset(), False)
        assert parser.accepts() == whole, (
            f"start -> pair B | twin B, pair -> A, twin -> A: after {names(grammar, pushed)} accepts() is {whole} "
            f"(llguidance): a sentence is the start rule complete from the first lexeme, not any rule (pair and twin "
            f"are complete after A); "
            f"you say {parser.accepts()}")


def push_text(parser: Any, grammar: Grammar, text: str) -> bool | None:
    """Push ``text``'s lexemes; None if some push is refused, else whether the parser accepts at the end."""
    pieces = lex_compact(grammar, text)
    if pieces is None:
        return None
    for piece in pieces:
        if not parser.push(piece):
            return None
    return bool(parser.accepts())


@pytest.mark.task(1)
@pytest.mark.parametrize("text", ['{"v": {}', '{"v": {"b": []}', '{"v": [{}]', '{"v": {}}', '{}', '{"v": []}'])
def test_accepts_only_with_every_bracket_closed(text: str) -> None:
    for name in ("json_object", "json_object twice"):
        grammar = grammar_of(name)
        whole = push_text(lab.EarleyParser(grammar), grammar, text)
        want = earley_accepts(grammar, text)
        assert whole == want, (
            f"{name} after {quote(text)}: accepts() is {whole}, lark's Earley parser says {want}: a sentence is "
            f"whole only when the start rule is complete from the very first lexeme (no bracket still open)")


@pytest.mark.task(1)
def test_refused_push_changes_nothing() -> None:
    for name in ("weather", "weather twice"):
        grammar = grammar_of(name)
        parser = lab.EarleyParser(grammar)
        assert parser.push(frozenset({grammar.lexeme_id("LBRACE")})), "{ starts the object"
        before = (parser.allowed(), parser.accepts(), parser.checkpoint())
        assert parser.push(frozenset({grammar.lexeme_id("RBRACE")})) is False, (
            f"{name}: the object has required properties")
        assert (parser.allowed(), parser.accepts(), parser.checkpoint()) == before, (
            f"{name}: a refused push changes nothing: allowed(), accepts() and checkpoint() are as before")
        with pytest.raises(ValueError):
            parser.rollback(99)


# Overlapping branches: lark's LALR parser cannot take these (a conflict), Earley can.
AMBIGUOUS: dict[str, Any] = {
    "type": "object", "properties": {"v": {"anyOf": [
        {"type": "array", "items": {"type": "string"}}, {"type": "array", "items": {"type": "integer"}},
        {"const": "x"}, {"type": "string", "maxLength": 2}, {"$ref": "#"}]}}, "required": ["v"]}

JSON_VALUES = st.recursive(st.none() | st.booleans() | st.integers(-20, 20) | st.sampled_from(["x", "yz", "abc"]),
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
                               st.sampled_from(["v", "w"]), inner, max_size=2), max_leaves=6)


@pytest.mark.task(1)
@given(JSON_VALUES, st.booleans())
@settings(max_examples=60, deadline=None)
def test_whole_texts_agree_with_lark_earley(value: Any, spaced: bool) -> None:
    """Ambiguous and recursive: your parser accepts a text exactly when lark's Earley parser does."""
    grammar = schema_to_grammar(AMBIGUOUS)
    text = json.dumps({"v": value}, separators=(", ", ": ") if spaced else (",", ":"))
    mine = push_text(lab.EarleyParser(grammar), grammar, text) is True
    want = earley_accepts(grammar, text)
    assert mine == want, (f"{quote(text)}: lark's Earley parser {'accepts' if want else 'refuses'} it, your parser "
                          f"{'accepts' if mine else 'does not'} (push each lexeme, then accepts())")


# ================================================================ task 2: the join


# Bytes every step tries besides a sample: JSON's punctuation, the starts of numbers and literals, a
# continuation byte, a lead byte, bytes that are never UTF-8.
STRUCTURAL = b'{}[]",: .eE+-019tfnu\\\x80\xc3\xe6\xf0\xff\x1f'


def byte_walk(name: str, seed: int, steps: int) -> tuple[list[Step], str | None]:
    """Feed random allowed bytes; at every step, the bytes tried are taken exactly when llguidance's byte mask
    allows them (the structural bytes, and a sample of the others), and EOS exactly when it allows EOS."""
    grammar, vocab = grammar_of(name), family_vocabulary("byte")
    oracle = GuidanceGrammarOracle(grammar, vocab)
    matcher = lab.ByteMatcher(grammar, LarkParser(grammar))
    rng, table, output = random.Random(seed), [], b""
    for _ in range(steps):
        want_all = oracle.mask()
        tried = sorted(set(STRUCTURAL) | set(rng.sample(range(256), 8)))
        mine = []
        for byte in tried:
            mark = matcher.checkpoint()
            if matcher.feed(byte):
                mine.append(byte)
                matcher.rollback(mark)
        if matcher.can_end():
            mine.append(vocab.eos_token_id)
        want = [t for t in want_all if t in tried or t == vocab.eos_token_id]
        token = rng.choice(want_all)
        table.append(Step(str(token), b"" if token == vocab.eos_token_id else bytes([token]), mask_text(mine, vocab),
                          mask_text(want, vocab)))
        if mine != want:
            return table, f"after {quote(output.decode('utf-8', 'replace'))}: {mask_difference(mine, want, vocab)}"
        if token == vocab.eos_token_id:
            break
        oracle.consume(token)
        assert matcher.feed(token), f"feed({token}) must take a byte llguidance allows here"
        output += bytes([token])
    return table, None


@pytest.mark.task(2)
@pytest.mark.parametrize("name", ["weather", "tree", "thread", "kinds", "json_object"])
def test_bytes_taken_equal_llguidance(name: str) -> None:
    for seed in range(1):
        table, problem = byte_walk(name, seed, 30)
        assert problem is None, format_trace(
            table, f"schema {name!r}, seed {seed}: a byte is taken when a live lexeme can read it, or when a "
            f"complete one ends there, the parser takes it, and the byte starts a lexeme the parser allows next; "
            f"EOS exactly when the lexeme can end and the parser then accepts; {problem}",
            columns=("you take", "llguidance takes"), inputs=("sampled", "byte"))


def fed(grammar: Grammar, text: bytes) -> Any:
    matcher = lab.ByteMatcher(grammar, LarkParser(grammar))
    for byte in text:
        assert matcher.feed(byte), f"{text!r} is a prefix of a valid reply: every byte of it must be taken"
    return matcher


@pytest.mark.task(2)
def test_a_lexeme_ends_only_where_the_parser_takes_it() -> None:
    """An integer is `12`, a number may go on to `12.5`: which one is live depends on the parser, not the bytes."""
    grammar = grammar_of("kinds")
    after_integer = fed(grammar, b'{"n": 12')
    assert not after_integer.feed(ord(".")), (
        "after '\"n\": 12' only an integer is live: '.' would extend a number, a lexeme the parser cannot take here")
    after_number = fed(grammar, b'{"n": 1, "x": 12')
    assert after_number.feed(ord(".")), "after '\"x\": 12' a number is live and '.' extends it (longest match)"


@pytest.mark.task(2)
def test_lexer_state_is_the_live_lexemes() -> None:
    grammar = grammar_of("json_object")
    string, rbrace = grammar.lexeme_id("STRING"), grammar.lexeme_id("RBRACE")
    matcher = fed(grammar, b'{"')
    want = lexer_state_after(grammar, frozenset({string, rbrace}), b'"')
    assert tuple(matcher.lexer_state) == want, (
        f"after '{{\"' the lexeme '{{' has ended and a new one began where the parser allows {{STRING, RBRACE}}; "
        f"only STRING reads '\"': lexer_state is the sorted (lexeme, automaton state) pairs still alive, {want}; "
        f"you have {matcher.lexer_state}")


@pytest.mark.task(2)
def test_refused_byte_changes_nothing() -> None:
    grammar = grammar_of("weather")
    matcher = fed(grammar, b'{"city": "ab", ')
    before = tuple(matcher.lexer_state)
    assert not matcher.feed(ord("}")), "temperature and unit are required: '}' cannot come yet"
    assert tuple(matcher.lexer_state) == before, "a refused byte changes nothing"
    assert matcher.can_end() is False, "the object is not whole yet: can_end() answers False (a bool, not None)"
    for byte in b'"temperature": 3, "unit": "celsius"}':
        assert matcher.feed(byte), "after a refusal, the right bytes still go on"
    assert matcher.can_end(), "the object is whole: EOS may come"


def a_then_maybe_bb() -> Grammar:
    """start -> A | A B, with A = "a" and B = "bb": after "ab" the sentence "a" is whole, and B is half read."""
    lexemes = tuple(Lexeme(name, regex, lexeme_automaton(regex)) for name, regex in (("A", "a"), ("B", "bb")))
    return Grammar(start="start", rules=(Rule("start", ("A",)), Rule("start", ("A", "B"))), lexemes=lexemes)


@pytest.mark.task(2)
def test_eos_needs_the_current_lexeme_whole() -> None:
    grammar = a_then_maybe_bb()
    for text in (b"a", b"ab", b"abb"):
        matcher = fed(grammar, text)
        want = earley_accepts(grammar, text.decode())
        assert matcher.can_end() is want, (
            f"start -> A | A B (A = 'a', B = 'bb'): after {text!r} can_end() is {want} (lark's Earley parser on the "
            f"whole text): EOS ends the lexeme being read, so it must be whole, and the parser must then hold a "
            f"sentence; you say {matcher.can_end()!r}")


@pytest.mark.task(2)
def test_the_parser_is_asked_only_where_a_lexeme_ends() -> None:
    """Counted on the tests' side: inside a string, feed, checkpoint and rollback never call the parser."""
    grammar = grammar_of("json_object")
    parser = LarkParser(grammar)
    matcher = lab.ByteMatcher(grammar, parser)
    for byte in b'{"a": "':
        assert matcher.feed(byte), (
            "the opening of an object and a string is JSON: the matcher must take each of its bytes")
    before = parser.calls
    mark = matcher.checkpoint()
    for byte in "東京 and more text 🫨".encode():
        assert matcher.feed(byte), "a string takes any character"
    matcher.rollback(mark)
    assert matcher.feed(ord("x")), (
        "after rolling back to the checkpoint inside the string, the string still takes any character")
    asked = parser.calls - before
    assert asked == 0, (f"inside one lexeme nothing ends, so the parser has nothing to say: feed, checkpoint and "
                        f"rollback asked it {asked} times (remember its checkpoint instead of asking)")


@pytest.mark.task(2)
def test_rollback_costs_the_stack_not_the_input_so_far() -> None:
    """Counted on the tests' side: a rollback across lexemes asks the parser for its own rollback, never for the
    lexemes before the checkpoint again, so the same steps after 5 and after 60 objects cost the same calls."""
    grammar = grammar_of("json_object")
    costs = {}
    for objects in (5, 60):
        parser = LarkParser(grammar)
        matcher = lab.ByteMatcher(grammar, parser)
        for byte in b'{"a": [' + b", ".join(b'{"b": 1}' for _ in range(objects)):
            assert matcher.feed(byte), "an open list of objects is JSON so far: the matcher must take each byte"
        before = (parser.pushes, parser.calls)
        for _ in range(3):
            mark = matcher.checkpoint()
            for byte in b', {"c": [2, "d"]}, {':
                assert matcher.feed(byte), "one more object is JSON so far: the matcher must take each byte"
            matcher.rollback(mark)
        costs[objects] = (parser.pushes - before[0], parser.calls - before[1])
        assert matcher.feed(ord("]")), "after the rollbacks the matcher stands where it was: ']' closes the list"
    assert costs[5] == costs[60], (
        f"three times: a checkpoint, 13 more lexemes, a rollback. That cost (parser pushes, parser calls) "
        f"{costs[5]} after 5 objects and {costs[60]} after 60: a rollback is the parser's rollback to the mark "
        f"(work for the stack), not the input so far read again")


# ================================================================ task 3: the trie walk


class WatchedMatcher:
    """Your matcher, watched from the tests' side: every feed is counted, with the prefix it extends."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.path = b""
        self.fed: list[bytes] = []  # each prefix fed (path + byte), in order
        self.taken: set[bytes] = {b""}  # prefixes whose last byte was taken

    def feed(self, byte: int) -> bool:
        prefix = self.path + bytes([byte])
        self.fed.append(prefix)
        ok = bool(self.inner.feed(byte))
        if ok:
            self.path = prefix
            self.taken.add(prefix)
        return ok

    def can_end(self) -> bool:
        return bool(self.inner.can_end())

    def checkpoint(self) -> Any:
        return (self.inner.checkpoint(), self.path)

    def rollback(self, mark: Any) -> None:
        self.inner.rollback(mark[0])
        self.path = mark[1]

    @property
    def lexer_state(self) -> Any:
        return self.inner.lexer_state


def mask_walk(masker_of: Any, family: str, name: str, seed: int, steps: int) -> tuple[list[Step], str | None]:
    """Your masks along a random walk (on your matcher over lark's parser), against llguidance's at every step."""
    grammar, vocab = grammar_of(name), family_vocabulary(family)
    masker = masker_of(grammar, vocab)
    matcher = lab.ByteMatcher(grammar, LarkParser(grammar))
    oracle = GuidanceGrammarOracle(grammar, vocab)
    rng, table, output = random.Random(seed), [], b""
    for _ in range(steps):
        mine, want = list(masker.mask(matcher)), oracle.mask()
        token = rng.choice(want)
        raw = b"" if token == vocab.eos_token_id else vocab.tokens[token] or b""
        table.append(Step(str(token), raw, mask_text(mine, vocab), mask_text(want, vocab)))
        if mine != want:
            return table, f"after {quote(output.decode('utf-8', 'replace'))}: {mask_difference(mine, want, vocab)}"
        if token == vocab.eos_token_id:
            break
        oracle.consume(token)
        for byte in raw:
            assert matcher.feed(byte), "the matcher must take the bytes of a token the oracle allowed"
        output += raw
    return table, None


TRIE_WALKS = {"byte": 30, "bpe": 25, "spm": 25}


@pytest.mark.task(3)
@pytest.mark.parametrize("family", list(TRIE_WALKS))
def test_trie_mask_equals_llguidance(family: str) -> None:
    for name in ("weather", "tree", "json_object"):
        table, problem = mask_walk(lambda _g, vocab: lab.TrieMasker(vocab, token_trie(vocab)), family, name, 1,
                                   TRIE_WALKS[family])
        assert problem is None, format_trace(
            table, f"{family}, schema {name!r}: the mask is every token whose bytes the matcher takes one after the "
            f"other from its state (roll back after each branch of the trie), plus EOS exactly when it can end; "
            f"{problem}", columns=("your mask", "llguidance's"), inputs=("sampled", "bytes"))


@pytest.mark.task(3)
@pytest.mark.parametrize("text", [b'{"city": "Tokyo"', b'{"city": "Tokyo", "temperature": 1'])
def test_trie_walk_prunes_dead_prefixes(text: bytes) -> None:
    """Counted on the tests' side: each prefix is fed once, and only below a prefix that was taken."""
    grammar, vocab = grammar_of("weather"), family_vocabulary("bpe")
    inner = lab.ByteMatcher(grammar, LarkParser(grammar))
    for byte in text:
        assert inner.feed(byte), "the text is valid for the grammar: the matcher must take each of its bytes"
    watched = WatchedMatcher(inner)
    lab.TrieMasker(vocab, token_trie(vocab)).mask(watched)
    below_dead = [p for p in watched.fed if p[:-1] not in watched.taken]
    assert not below_dead, (f"a prefix the matcher refused rules out every token under it: you fed "
                            f"{below_dead[0]!r} after its prefix was refused")
    twice = len(watched.fed) - len(set(watched.fed))
    assert twice == 0, f"each trie edge is tried once per mask: {twice} prefixes were fed more than once"
    assert watched.path == b"", "the mask leaves the matcher where it found it (roll back after every branch)"


# ================================================================ task 4: the split


def lexer_states(name: str, samples: Sequence[bytes]) -> list[tuple[tuple[int, int], ...]]:
    """Lexer states where the parser allows each lexeme set met on a short walk, after each sample's bytes."""
    grammar = grammar_of(name)
    parser, seen, rng = LarkParser(grammar), [], random.Random(5)
    for _ in range(12):
        allowed = frozenset(parser.allowed())
        if not allowed:
            break
        for data in samples:
            state = lexer_state_after(grammar, allowed, data)
            if state and state not in seen:
                seen.append(state)
        parser.push(frozenset({rng.choice(sorted(allowed))}))
    return seen


SPLIT_SAMPLES = (b"", b'"', b'"ab', b'"abcdefgh', b'"\xe6\x9d', b"1", b"-", b"12.", b"t", b"nul", b", ", b":")


@pytest.mark.task(4)
@pytest.mark.parametrize("name", ["weather", "thread", "json_object"])
def test_split_equals_the_definition(name: str) -> None:
    grammar, vocab = grammar_of(name), family_vocabulary("bpe")
    cache = lab.LexerCache(grammar, vocab, token_trie(vocab))
    for state in lexer_states(name, SPLIT_SAMPLES):
        mine, want = cache.split(state), lexer_split(grammar, vocab, state)
        live = ", ".join(f"{grammar.lexemes[x].name}@{s}" for x, s in state)
        for part in ("allowed", "undecided"):
            got, expected = list(getattr(mine, part)), list(getattr(want, part))
            assert got == expected, (
                f"schema {name!r}, lexer state [{live}]: {part} differs; allowed = every byte of the token goes on "
                f"inside a live lexeme; undecided = the token stops where a live lexeme is complete (the parser "
                f"decides the rest); {mask_difference(got, expected, vocab)}")


@pytest.mark.task(4)
def test_split_is_keyed_by_the_whole_lexer_state() -> None:
    """The same live lexeme at two places in it: `"a` can take 7 more characters, `"abcdefgh` none."""
    grammar, vocab = grammar_of("weather"), family_vocabulary("bpe")
    string = next(x for x, lexeme in enumerate(grammar.lexemes) if "{0,8}" in lexeme.regex)
    cache = lab.LexerCache(grammar, vocab, token_trie(vocab))
    for data in (b'"a', b'"abcdefgh', b'"a'):
        state = lexer_state_after(grammar, frozenset({string}), data)
        mine, want = cache.split(state), lexer_split(grammar, vocab, state)
        assert list(mine.allowed) == list(want.allowed), (
            f"after {data!r}: the split belongs to the whole lexer state (which lexemes, and where each stands), "
            f"not to the set of lexemes alone; {mask_difference(list(mine.allowed), list(want.allowed), vocab)}")


@pytest.mark.task(4)
def test_split_is_computed_once_per_lexer_state() -> None:
    grammar, counters = counting_grammar(grammar_of("weather"))
    cache = lab.LexerCache(grammar, bpe := family_vocabulary("bpe"), token_trie(bpe))
    states = lexer_states("weather", (b'"', b'"ab', b"1"))
    for state in states:
        cache.split(state)
    first = sum(c.steps for c in counters)
    for state in states:
        cache.split(state)
    again = sum(c.steps for c in counters) - first
    assert first > 0, "the split reads the lexemes' automata (counted on the tests' side)"
    assert again == 0, f"a lexer state's split is computed once: asking again took {again} automaton steps"


@pytest.mark.task(4)
@pytest.mark.parametrize("family", ["byte", "bpe", "spm", "mistral", "tekken"])
def test_split_mask_equals_llguidance(family: str) -> None:
    # The real vocabularies walk fewer steps and schemas: a trie of Tekken takes seconds of Python to build.
    walks = {"byte": 30, "bpe": 20, "spm": 20, "mistral": 4, "tekken": 4}[family]
    schemas = {"mistral": ("json_object",), "tekken": ("json_object",)}.get(
        family, ("weather", "tree", "thread", "json_object"))
    for name in schemas:
        table, problem = mask_walk(lambda grammar, vocab: lab.SplitMasker(grammar, vocab, token_trie(vocab)), family,
                                   name, 2, walks)
        assert problem is None, format_trace(
            table, f"{family}, schema {name!r}: the split's allowed tokens, plus each undecided token the matcher "
            f"takes to its last byte, plus EOS when it can end; {problem}", columns=("your mask", "llguidance's"),
            inputs=("sampled", "bytes"))


def counted_masks(schema: Any, text: bytes, family: str = "bpe") -> list[tuple[int, int]]:
    """(lexer steps, parser pushes) of a SplitMasker mask at the four tokens around the middle of ``text``
    (the innermost array), once its split is known, counted on the tests' side."""
    grammar, counters = counting_grammar(schema_to_grammar(schema))
    vocab = family_vocabulary(family)
    parser = LarkParser(grammar)
    matcher, masker = lab.ByteMatcher(grammar, parser), lab.SplitMasker(grammar, vocab, token_trie(vocab))
    costs = []
    ids = load_tokenizer(family).encode(text.decode())
    middle = range(len(ids) // 2 - 2, len(ids) // 2 + 2)
    for position, token in enumerate(ids):
        if position in middle:
            masker.mask(matcher)  # the first visit of a lexer state pays for its split
            steps, pushes = sum(c.steps for c in counters), parser.pushes
            masker.mask(matcher)  # a later visit: only the undecided tokens
            costs.append((sum(c.steps for c in counters) - steps, parser.pushes - pushes))
        for byte in vocab.tokens[token] or b"":
            assert matcher.feed(byte), (
                "a token the mask allowed must be readable: the matcher must take each of its bytes")
    return costs


@pytest.mark.task(4)
def test_a_mask_costs_only_the_undecided_tokens() -> None:
    """Counted: once its split is known, a mask steps the lexer only through the tokens the lexer cannot decide."""
    grammar, counters = counting_grammar(grammar_of("weather"))
    vocab = family_vocabulary("bpe")
    parser = LarkParser(grammar)
    matcher, masker = lab.ByteMatcher(grammar, parser), lab.SplitMasker(grammar, vocab, token_trie(vocab))
    for byte in b'{"city": "Tok':
        assert matcher.feed(byte), "the text is valid for the grammar: the matcher must take each of its bytes"
    masker.mask(matcher)
    split = lexer_split(grammar_of("weather"), vocab, tuple(matcher.lexer_state))
    steps, pushes = sum(c.steps for c in counters), parser.pushes
    masker.mask(matcher)
    steps, pushes = sum(c.steps for c in counters) - steps, parser.pushes - pushes
    lexemes = len(grammar.lexemes)
    walked = sum(len(vocab.tokens[t] or b"") for t in split.undecided)
    bound = walked * lexemes + lexemes
    assert steps <= bound, (
        f"inside a string {len(split.allowed)} tokens are decided by the lexer alone: a mask may only walk the "
        f"{len(split.undecided)} undecided ones (at most {bound} automaton steps); you took {steps}")
    assert pushes <= walked + 1, (
        f"the parser is asked only about the undecided tokens (at most once per byte of them, and once for EOS): "
        f"{pushes} pushes for {len(split.undecided)} undecided tokens of {walked} bytes")


def deep_text(depth: int) -> bytes:
    return ('{"a": ' + "[" * depth + '"ab", "c"' + "]" * depth + "}").encode()


@pytest.mark.task(4)
def test_depth_20_costs_what_depth_2_costs() -> None:
    """The blowup lesson, counted: the same tokens inside 2 and inside 20 levels of arrays cost the same work."""
    inner_shallow = counted_masks(nested_arrays(2), deep_text(2))
    inner_deep = counted_masks(nested_arrays(20), deep_text(20))
    assert inner_deep == inner_shallow, (
        f"masks inside the innermost array cost (lexer steps, parser pushes) {inner_shallow} at depth 2 and "
        f"{inner_deep} at depth 20: nesting is a stack frame, and a mask must not walk the stack")


def reply_with(masked: bool, family: str = "bpe", limit: int = 200) -> bytes:
    """Greedy over the toy model's scores for a reply asked 'as json', with lab-09's mask or none."""
    grammar, vocab = schema_to_grammar(NOTE_OR_OBJECT), family_vocabulary(family)
    ids: list[int]
    model, ids = ToyModel(load_tokenizer(family)), []
    matcher = lab.ByteMatcher(grammar, LarkParser(grammar)) if masked else None
    masker = lab.SplitMasker(grammar, vocab, token_trie(vocab)) if masked else None
    for _ in range(limit):
        scores = model.scores("the weather in Tokyo as json, please", ids)
        allowed = masker.mask(matcher) if masker is not None else range(len(scores))
        best = min(allowed, key=lambda i: (-scores[i], i))
        if best == vocab.eos_token_id:
            break
        ids.append(best)
        if matcher is not None:
            for byte in vocab.tokens[best] or b"":
                assert matcher.feed(byte), (
                    "a token the mask allowed must be readable: the matcher must take each of its bytes")
    return b"".join(vocab.tokens[i] or b"" for i in ids)


# The weather reply's shape, where a note may itself be a whole weather object: a schema with a stack.
NOTE_OR_OBJECT: dict[str, Any] = {
    "type": "object", "additionalProperties": False, "required": ["city", "temperature", "unit", "note"],
    "properties": {"city": {"type": "string"}, "temperature": {"type": "integer"},
                   "unit": {"enum": ["celsius", "fahrenheit"]}, "note": {"anyOf": [{"type": "string"}, {"$ref": "#"}]}}}


@pytest.mark.task(4)
def test_masked_toy_reply_validates() -> None:
    reply = reply_with(masked=True)
    jsonschema.validate(json.loads(reply.decode("utf-8")), NOTE_OR_OBJECT)


# ================================================================ controls


@pytest.mark.control
def test_unmasked_toy_model_breaks_the_recursive_schema() -> None:
    """The same scores without a mask: prose around the object, and json.loads fails."""
    bpe = load_tokenizer("bpe")
    ids: list[int]
    model, ids = ToyModel(bpe), []
    for _ in range(300):
        scores = model.scores("the weather in Tokyo as json, please", ids)
        best = max(range(len(scores)), key=scores.__getitem__)
        if best == bpe.eos_token_id:
            break
        ids.append(best)
    with pytest.raises(json.JSONDecodeError):
        json.loads(bpe.decode(ids))


@pytest.mark.control
def test_llguidance_masked_toy_model_validates() -> None:
    """The control's other half, with a library's mask: every masked reply parses and validates."""
    grammar, vocab = schema_to_grammar(NOTE_OR_OBJECT), family_vocabulary("bpe")
    ids: list[int]
    oracle, model, ids = GuidanceGrammarOracle(grammar, vocab), ToyModel(load_tokenizer("bpe")), []
    for _ in range(200):
        scores = model.scores("the weather in Tokyo as json, please", ids)
        best = min(oracle.mask(), key=lambda i: (-scores[i], i))
        if best == vocab.eos_token_id:
            break
        ids.append(best)
        oracle.consume(best)
    jsonschema.validate(json.loads(b"".join(vocab.tokens[i] or b"" for i in ids)), NOTE_OR_OBJECT)


@pytest.mark.control
def test_grammar_is_linear_in_depth_where_the_regex_doubles() -> None:
    """lab-08's way writes each level of arrays into the regex twice over; the grammar adds a few rules per level."""
    from mini_vllm.grammars.grammar import schema_to_regex

    sizes = {d: grammar_size(schema_to_grammar(nested_arrays(d))) for d in (2, 4, 8, 20)}
    steps = {sizes[4] - sizes[2], (sizes[8] - sizes[4]) // 2, (sizes[20] - sizes[8]) // 6}
    assert len(steps) == 1, f"the grammar grows by the same few symbols per level: {sizes}"
    regex = {d: len(schema_to_regex(nested_arrays(d))) for d in (2, 4, 6)}
    assert regex[6] > 3 * regex[4] > 9 * regex[2], f"the regex grows geometrically with depth: {regex}"
