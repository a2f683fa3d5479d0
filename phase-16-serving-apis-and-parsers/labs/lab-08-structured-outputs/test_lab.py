"""Lab 08 tests: token masks from a grammar over characters, on vocabularies of bytes.

Run against your code:  make lab-08
Every graded test is marked with the task it grades. Each task is tested on inputs the tests
build themselves (the byte automaton of tasks 2-5 comes from the oracle lifting in
mini_vllm.testing.structured: outlines-core's DFA over bytes, not your task 1), so a bug costs
points where it lives. Oracles: outlines-core's index and llguidance's matcher, configured to the
same regular expression; the stdlib's UTF-8 decoder; the sampler's choices recorded from the
reference (mini_vllm/testing/fixtures/lab08_samples.json, recorded by the course's instructor tooling).
"""

from __future__ import annotations

import codecs
import functools
import itertools
import json
import random
from types import ModuleType
from typing import Any

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mini_vllm import load_tokenizer
from mini_vllm.grammars.grammar import regex_to_chars, schema_to_regex
from mini_vllm.labs import load_lab
from mini_vllm.labtypes.lab08 import DEAD, ByteAutomaton, CharAutomaton, TokenRejected, Vocabulary, token_trie
from mini_vllm.sandbox.probes import install as install_probe
from mini_vllm.testing import recorded
from mini_vllm.testing.expect import must_raise
from mini_vllm.testing.masks import mask_difference, mask_text
from mini_vllm.testing.structured import (
    CALL_PARAMETERS,
    SAMPLER_CASES,
    WEATHER_SCHEMA,
    CountingAutomaton,
    GuidanceOracle,
    OutlinesOracle,
    class_regex,
    family_vocabulary,
    library_grammar,
    lifting_difference,
    sampler_run,
    trie_steps,
    walk,
)
from mini_vllm.testing.trace import Step, format_trace, quote
from mini_vllm.toy_model import ToyModel
from mini_vllm.toy_scripts import WEATHER_JSON

lab = load_lab("lab-08")

TASKS = {
    1: "lift_to_bytes: the character automaton as UTF-8 byte ranges",
    2: "TokenMasker: the tokens a state can read (scan, then trie walk)",
    3: "GrammarCursor.advance: consume a token, carry a partial character, refuse cleanly",
    4: "TokenIndex: every state's mask, precomputed and counted",
    5: "StructuredSampler: the masked choice, only after the thought",
}

WEATHER: dict[str, Any] = WEATHER_SCHEMA
SCHEMAS: dict[str, dict[str, Any]] = {
    "weather": WEATHER,
    "nested": {"type": "object", "properties": {
        "ok": {"type": "boolean"}, "tags": {"type": "array", "items": {"type": "string", "maxLength": 3}},
        "where": {"type": "object", "properties": {"x": {"type": "number"}, "y": {"type": "null"}},
                  "required": ["x"], "additionalProperties": False}},
        "required": ["ok", "tags", "where"], "additionalProperties": False},
    "short-cjk": {"type": "string", "minLength": 2, "maxLength": 4},
    "const": {"const": "東京🫨"},
}
# Character classes at the edges RFC 3629 draws: each UTF-8 length, the surrogate gap, the end of Unicode.
CLASSES: dict[str, str] = {
    "ascii": "[a-z0-9]+",
    "cjk-range": "[一-龥]+",  # xgrammar #491: must not shrink to one byte
    "any-character": "[^\n]*",  # every code point but one: the class a JSON string uses, near enough
    "across-surrogates": "[\ud000-\ue000]x",
    "length-edges": "[\x7f-\x80\u07ff-\u0800\uffff-\U00010000\U0010ffff]{1,3}",
    "two-byte-only": "[\u00a0-\u07ff]?!",
    "astral": "[\U0001f300-\U0001faff]{0,2}",
}


@functools.cache
def chars_of(regex: str) -> CharAutomaton:
    return regex_to_chars(regex)


def oracle_automaton(regex: str) -> ByteAutomaton:
    """outlines-core's DFA for ``regex`` over bytes (tasks 2-5 run on it, never on your task 1)."""
    return library_grammar(regex).automaton


@functools.cache
def outlines_index(regex: str, family: str) -> OutlinesOracle:
    return OutlinesOracle(regex, family_vocabulary(family))


def oracle_mask(regex: str, family: str, state: int) -> list[int]:
    """outlines-core's mask at a state of ``oracle_automaton(regex)``, for the family's vocabulary."""
    return outlines_index(regex, family).mask_at(library_grammar(regex), state)


@functools.cache
def regex_of(name: str) -> str:
    return schema_to_regex(SCHEMAS[name]) if name in SCHEMAS else CLASSES[name]


def language_problem(mine: ByteAutomaton, regex: str, rule: str) -> str | None:
    """None when ``mine`` reads exactly the oracle's language; else the rule and the shortest input that differs."""
    difference = lifting_difference(mine, chars_of(regex), regex)
    if difference is None:
        return None
    path = difference.path
    steps = [Step(f"byte {k + 1}", path[k:k + 1], "reads it", "reads it") for k in range(len(path) - 1)]
    at_end = difference.theirs.endswith("string")
    steps.append(Step("end" if at_end else f"byte {len(path)}", b"" if at_end else path[-1:],
                      difference.theirs if at_end else f"{difference.theirs} it",
                      difference.oracle if at_end else f"{difference.oracle} it"))
    text = path.decode("utf-8", "replace")
    return format_trace(steps, f"{rule}\nregex {regex!r}: the shortest input read differently is "
                        f"{path.hex(' ') or 'empty'} ({quote(text)}): {difference.sentence()}",
                        columns=("yours", "llguidance"))


# ================================================================ task 1: lift_to_bytes


@pytest.mark.task(1)
def test_ascii_class_keeps_one_byte_per_character() -> None:
    lifted = lab.lift_to_bytes(chars_of(CLASSES["ascii"]))
    problem = language_problem(lifted, CLASSES["ascii"], "an ASCII character is one byte: the class reads "
                               "as the same bytes")
    assert problem is None, problem


@pytest.mark.task(1)
@pytest.mark.parametrize("name", list(CLASSES), ids=list(CLASSES))
def test_class_lifts_to_its_utf8_ranges(name: str) -> None:
    lifted = lab.lift_to_bytes(chars_of(CLASSES[name]))
    problem = language_problem(lifted, CLASSES[name], "each code point of a class reads as its own UTF-8 bytes "
                               "(RFC 3629), and nothing else does: no surrogates, no overlong forms")
    assert problem is None, problem


@pytest.mark.task(1)
@pytest.mark.parametrize("name", list(SCHEMAS), ids=list(SCHEMAS))
def test_schema_automaton_lifts_to_the_same_language(name: str) -> None:
    regex = regex_of(name)
    problem = language_problem(lab.lift_to_bytes(chars_of(regex)), regex, f"schema {name!r}: the byte automaton "
                               "reads exactly the UTF-8 encodings of the strings the character automaton reads")
    assert problem is None, problem


NEVER_UTF8 = {
    "overlong-c0": b"\xc0\x80", "overlong-e0": b"\xe0\x80\x80", "overlong-f0": b"\xf0\x80\x80\x80",
    "surrogate": b"\xed\xa0\x80", "past-10ffff": b"\xf4\x90\x80\x80", "f5": b"\xf5\x80\x80\x80",
    "lone-continuation": b"\x80", "cut-short-then-ascii": b"\xe4\xbdA",
}


@pytest.mark.task(1)
@pytest.mark.parametrize("data", NEVER_UTF8.values(), ids=NEVER_UTF8.keys())
def test_any_character_class_refuses_bytes_that_are_no_character(data: bytes) -> None:
    lifted = lab.lift_to_bytes(chars_of(CLASSES["any-character"]))
    state = walk(lifted, lifted.start, data)
    assert state == DEAD or not lifted.is_accepting(state), (
        f"{data.hex(' ')} is not UTF-8 for any character, so even a class of every code point must not read it "
        f"as a whole string")
    assert walk(lifted, lifted.start, data) == DEAD, (
        f"no character starts with {data.hex(' ')}: the automaton must refuse it at once, not wait")


@pytest.mark.task(1)
def test_max_length_counts_characters_not_bytes() -> None:
    """maxLength 8 means 8 characters: eight emoji (32 bytes) fit; the first byte of a ninth is already refused."""
    regex = schema_to_regex({"type": "string", "maxLength": 8})
    lifted = lab.lift_to_bytes(chars_of(regex))
    eight = ('"' + "🫨" * 8).encode("utf-8")
    state = walk(lifted, lifted.start, eight)
    assert state != DEAD, "8 emoji are 8 characters: maxLength 8 allows them (32 bytes is not the limit)"
    assert walk(lifted, state, b'"') != DEAD and lifted.is_accepting(walk(lifted, state, b'"')), (
        "the string of 8 emoji closes and is complete")
    assert walk(lifted, state, b"\xf0") == DEAD, "the first byte of a ninth character must already be refused"


@st.composite
def code_point_ranges(draw: st.DrawFn) -> list[tuple[int, int]]:
    """Sorted, disjoint code-point ranges drawn around the UTF-8 length edges (plain data: a failing example
    prints them)."""
    edges = [0, 0x7F, 0x80, 0x7FF, 0x800, 0xD7FF, 0xD800, 0xDFFF, 0xE000, 0xFFFF, 0x10000, 0x10FFFF]
    points = draw(st.lists(st.sampled_from(edges) | st.integers(0, 0x10FFFF), min_size=2, max_size=8, unique=True))
    points.sort()
    return [(points[i], points[i + 1]) for i in range(0, len(points) - 1, 2)]


@pytest.mark.task(1)
@given(ranges=code_point_ranges())
@settings(max_examples=60)
def test_any_ranges_lift_exactly(ranges: list[tuple[int, int]]) -> None:
    chars = CharAutomaton(start=0, accepting=(1,), transitions=(tuple((lo, hi, 1) for lo, hi in ranges), ()))
    mine = lab.lift_to_bytes(chars)
    difference = lifting_difference(mine, chars, class_regex(ranges))
    assert difference is None, (
        f"the class {[(hex(a), hex(b)) for a, b in ranges]} must read exactly the UTF-8 of its code points "
        f"(llguidance's matcher for it is the oracle): on {difference.path.hex(' ') or 'the empty input'} "
        f"{difference.sentence()}")


# ================================================================ schemas from a strategy


def string_schemas() -> st.SearchStrategy[dict[str, Any]]:
    words = st.sampled_from(["a", "東京", "🫨", "x y", "naïve"])
    return st.one_of(
        st.builds(lambda lo, extra: {"type": "string", "minLength": lo, "maxLength": lo + extra},
                  st.integers(0, 2), st.integers(0, 3)),
        st.lists(words, min_size=1, max_size=3, unique=True).map(lambda values: {"enum": values}),
        words.map(lambda value: {"const": value}),
        st.just({"type": "string"}),
    )


LEAVES = st.one_of(string_schemas(), st.sampled_from([{"type": t} for t in ("integer", "number", "boolean", "null")]))


def objects(children: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[dict[str, Any]]:
    def an_object(props: dict[str, dict[str, Any]], required: list[bool]) -> dict[str, Any]:
        names = list(props)
        return {"type": "object", "properties": props, "additionalProperties": False,
                "required": [n for n, keep in zip(names, required, strict=False) if keep]}
    return st.builds(an_object, st.dictionaries(st.sampled_from(["a", "b", "名"]), children, min_size=1, max_size=2),
                     st.lists(st.booleans(), min_size=2, max_size=2))


def with_children(children: st.SearchStrategy[dict[str, Any]]) -> st.SearchStrategy[dict[str, Any]]:
    return objects(children) | children.map(lambda item: {"type": "array", "items": item})


# The root is an object, as OpenAI's strict mode requires. (At the root, a bare number is where
# outlines-core's index parts from the definition: after "14" it refuses ".", "e" and "E"; see README.)
SCHEMA_STRATEGY = objects(st.recursive(LEAVES, with_children, max_leaves=3))


# ================================================================ task 2: the mask


def random_walk_trace(family: str, regex: str, steps: int, seed: int,
                      mask_of: str = "mask") -> tuple[list[Step], str | None]:
    """Walk the grammar with random allowed tokens; at every step compare your mask with both oracles'.

    Returns the table and, if they ever disagree, the difference at that step.
    """
    vocab = family_vocabulary(family)
    automaton = oracle_automaton(regex)
    masker = lab.TokenMasker(automaton, vocab, token_trie(vocab))
    first = getattr(masker, mask_of)(automaton.start)  # before the oracles are built: a stub fails at once
    outlines, guidance = OutlinesOracle(regex, vocab), GuidanceOracle(regex, vocab)
    rng, state, table, output = random.Random(seed), automaton.start, [], b""
    for step in range(steps):
        mine, want = first if step == 0 else getattr(masker, mask_of)(state), outlines.mask()
        assert want == guidance.mask(), (
            f"the two oracles disagree (a bug in the course, not in your code): regex {regex!r} after {output!r}: "
            f"{mask_difference(guidance.mask(), want, vocab)}")
        token = rng.choice(want)
        label, raw = (str(token), b"" if token == vocab.eos_token_id else vocab.tokens[token] or b"")
        table.append(Step(label, raw, mask_text(mine, vocab), mask_text(want, vocab)))
        if list(mine) != want:
            return table, mask_difference(mine, want, vocab)
        if token == vocab.eos_token_id:
            break
        outlines.consume(token)
        guidance.consume(token)
        state, output = walk(automaton, state, raw), output + raw
    return table, None


WALK_STEPS = {"byte": 40, "bpe": 30, "spm": 30, "mistral": 10, "tekken": 6}


@pytest.mark.task(2)
@pytest.mark.parametrize("family", list(WALK_STEPS))
def test_mask_equals_both_oracles_on_random_walks(family: str) -> None:
    # The real vocabularies walk the weather schema only (a trie of Tekken takes a second of Python to build);
    # test_tekken_byte_tokens_can_spell_an_emoji walks "const" on Tekken.
    walks = (("weather", 1), ("const", 2)) if family in ("byte", "bpe", "spm") else (("weather", 1),)
    for name, seed in walks:
        table, difference = random_walk_trace(family, regex_of(name), WALK_STEPS[family], seed)
        assert difference is None, format_trace(
            table, f"{family}, schema {name!r}: the mask is every token whose whole byte string the automaton "
            f"can read from the state (a token may end inside a character), plus EOS exactly when it accepts; "
            f"{difference}", columns=("your mask", "oracle's mask"), inputs=("sampled", "bytes"))


@pytest.mark.task(2)
def test_scan_equals_both_oracles() -> None:
    table, difference = random_walk_trace("bpe", regex_of("weather"), 25, 7, mask_of="scan")
    assert difference is None, format_trace(
        table, f"scan: walk every token's bytes from the state; keep the ones the automaton reads to the end; "
        f"{difference}", columns=("your scan", "oracle's mask"), inputs=("sampled", "bytes"))


@pytest.mark.task(2)
def test_tekken_byte_tokens_can_spell_an_emoji() -> None:
    """Tekken writes 🫨 as four single-byte tokens: every one of them must be allowed in turn."""
    tekken = load_tokenizer("tekken")
    vocab = family_vocabulary("tekken")
    regex = regex_of("const")  # "東京🫨"
    automaton = oracle_automaton(regex)
    masker = lab.TokenMasker(automaton, vocab, token_trie(vocab))
    state = walk(automaton, automaton.start, '"東京'.encode())
    ids = tekken.encode("🫨")
    assert [vocab.tokens[i] for i in ids] == [b"\xf0", b"\x9f", b"\xab", b"\xa8"], "Tekken splits 🫨 in four bytes"
    for k, token in enumerate(ids):
        mask = masker.mask(state)
        assert token in mask, (
            f"after {k} of 🫨's bytes, Tekken's token {vocab.tokens[token]!r} is the only way on, but your mask "
            f"({mask_text(mask, vocab)}) refuses it: a token may end inside a character")
        state = walk(automaton, state, vocab.tokens[token] or b"")


@pytest.mark.task(2)
def test_after_a_lead_byte_only_continuations_are_allowed() -> None:
    vocab = family_vocabulary("bpe")
    regex = regex_of("weather")
    automaton = oracle_automaton(regex)
    state = walk(automaton, automaton.start, b'{"city": "\xf0\x9f')  # inside a string, after F0 9F
    mine, want = lab.TokenMasker(automaton, vocab, token_trie(vocab)).mask(state), oracle_mask(regex, "bpe", state)
    assert mine == want, (
        f"after F0 9F only tokens that go on with continuation bytes (and finish the character) are allowed: "
        f"{mask_difference(mine, want, vocab)}")


@pytest.mark.task(2)
@pytest.mark.parametrize("family", ["byte", "bpe"])
def test_eos_exactly_when_accepting(family: str) -> None:
    vocab = family_vocabulary(family)
    automaton = oracle_automaton(regex_of("weather"))
    masker = lab.TokenMasker(automaton, vocab, token_trie(vocab))
    wrong = [state for state in range(automaton.num_states)
             if (vocab.eos_token_id in masker.mask(state)) != automaton.is_accepting(state)]
    assert not wrong, (f"EOS ends the output, so it is allowed exactly in accepting states: wrong in states "
                       f"{wrong[:8]} (accepting: {[automaton.is_accepting(s) for s in wrong[:8]]})")


def no_newline_automaton() -> ByteAutomaton:
    """One state, accepting, that reads every byte but a newline: a token is readable exactly when it holds none."""
    return ByteAutomaton(start=0, accepting=[True], table=[[DEAD if b == 0x0A else 0 for b in range(256)]])


# EOS first (id 0), so a mask that appends EOS after the other ids is out of order; b"\x00" sorts first of all.
LOW_EOS = Vocabulary(tokens=[None, b"ab", b"a\n", b"\x00", b"\n", b"a", None, b"b\xff"], eos_token_id=0)


@pytest.mark.task(2)
@pytest.mark.parametrize("method", ["scan", "mask"])
def test_masks_are_sorted_ids_with_eos_in_its_place(method: str) -> None:
    """EOS is an id like any other: in an accepting state it sits in the sorted list where its id falls."""
    masker = lab.TokenMasker(no_newline_automaton(), LOW_EOS, token_trie(LOW_EOS))
    got = getattr(masker, method)(0)
    readable = [i for i, t in enumerate(LOW_EOS.tokens) if t is not None and b"\n" not in t]
    want = sorted([LOW_EOS.eos_token_id, *readable])
    assert got == want, (
        f"{method}(state) is the sorted ids of every token the state reads to the end, EOS in its place when the "
        f"state accepts (here EOS is id 0 and every token without a newline is readable, b'\\x00' too): expected "
        f"{want}, got {got}")


@pytest.mark.task(2)
@pytest.mark.parametrize("name", ["weather", "short-cjk"])
def test_trie_walk_prunes_dead_prefixes(name: str) -> None:
    """Count the automaton steps a mask takes: one per child of each readable prefix, no more."""
    vocab = family_vocabulary("bpe")
    automaton = oracle_automaton(regex_of(name))
    for state in range(0, automaton.num_states, 3):
        counting = CountingAutomaton(automaton)
        mine = lab.TokenMasker(counting, vocab, token_trie(vocab)).mask(state)
        budget = trie_steps(automaton, vocab, state)
        assert mine == oracle_mask(regex_of(name), "bpe", state), f"state {state}: the mask itself is wrong"
        assert counting.steps <= budget, (
            f"state {state}: a trie walk steps the automaton once per child of each prefix it can read "
            f"({budget} steps here); you took {counting.steps}. Skip everything below a dead prefix, and read "
            "the automaton through step() only")


@pytest.mark.task(2)
@given(SCHEMA_STRATEGY, st.integers(0, 2**16))
@settings(max_examples=25)
def test_masks_for_schemas_from_a_strategy(schema: dict[str, Any], seed: int) -> None:
    regex = schema_to_regex(schema)
    table, difference = random_walk_trace("bpe", regex, 12, seed)
    assert difference is None, format_trace(
        table, f"schema {json.dumps(schema, ensure_ascii=False)}: your mask must equal both oracles' at every step; "
        f"{difference}", columns=("your mask", "oracle's mask"), inputs=("sampled", "bytes"))


# ================================================================ task 3: advance


def cursor(name: str = "weather", family: str = "bpe") -> tuple[Any, ByteAutomaton, Vocabulary]:
    automaton, vocab = oracle_automaton(regex_of(name)), family_vocabulary(family)
    return lab.GrammarCursor(automaton, vocab), automaton, vocab


@pytest.mark.task(3)
def test_advance_carries_a_partial_character() -> None:
    """🫨 in the shipped BPE is f0 9f | ab | a8: the state sits inside the character between tokens."""
    the_cursor, automaton, vocab = cursor("const")
    bpe = load_tokenizer("bpe")
    ids = bpe.encode('"東京🫨"')
    expected_state, output = automaton.start, b""
    for token in ids:
        the_cursor.advance(token)
        output += vocab.tokens[token] or b""
        expected_state = walk(automaton, expected_state, vocab.tokens[token] or b"")
        unfinished = output[len(output.decode("utf-8", "ignore").encode()):] if output[-1:] >= b"\x80" else b""
        assert (the_cursor.state, the_cursor.pending) == (expected_state, unfinished), (
            f"after {output!r} the state is where the automaton's walk over those bytes ends ({expected_state}) "
            f"and pending holds the unfinished character ({unfinished!r}); you have state {the_cursor.state}, "
            f"pending {the_cursor.pending!r}")
    the_cursor.advance(vocab.eos_token_id)
    assert the_cursor.finished, "EOS in an accepting state finishes the output"


def readable_then_refused(vocab: Vocabulary, automaton: ByteAutomaton, state: int) -> int:
    """A token whose first byte the state reads, and a later one it does not."""
    return next(i for i, t in enumerate(vocab.tokens) if t and len(t) > 1
                and automaton.step(state, t[0]) != DEAD and walk(automaton, state, t) == DEAD)


REFUSED = {
    "wrong-byte": lambda vocab, *_: next(i for i, t in enumerate(vocab.tokens) if t == b"x"),
    "readable-then-refused": readable_then_refused,
    "special": lambda vocab, *_: next(i for i, t in enumerate(vocab.tokens) if t is None and i != vocab.eos_token_id),
    "eos-too-early": lambda vocab, *_: vocab.eos_token_id,
    "past-vocab": lambda vocab, *_: len(vocab.tokens),
    "negative": lambda vocab, *_: -1,
}
# Why each one is refused, as the failure names it.
REFUSED_BECAUSE = {
    "wrong-byte": "its byte cannot follow here", "readable-then-refused": "its first byte can follow, a later one "
    "cannot", "special": "it is a special token, never part of the output", "eos-too-early": "it is EOS, and the "
    "state is not accepting (the string is not whole yet)", "past-vocab": "it is past the end of the vocabulary",
    "negative": "it is no token id",
}


@pytest.mark.task(3)
@pytest.mark.parametrize("case", REFUSED)
def test_refused_token_raises_and_changes_nothing(case: str) -> None:
    the_cursor, automaton, vocab = cursor("const")
    bpe = load_tokenizer("bpe")
    ids = bpe.encode('"東京🫨"')
    for token in ids[:-2]:  # stop inside 🫨 (after f0 9f): a partial character is held
        the_cursor.advance(token)
    before = (the_cursor.state, the_cursor.pending, the_cursor.finished)
    bad = REFUSED[case](vocab, automaton, the_cursor.state)
    error = must_raise(lambda: the_cursor.advance(bad), TokenRejected,
                       f"advance({bad}) in state {before[0]} (token {bad}: {REFUSED_BECAUSE[case]})")
    assert str(bad) in str(error), f"the error must name the refused token {bad}: {error}"
    after = (the_cursor.state, the_cursor.pending, the_cursor.finished)
    assert after == before, (f"a refused token changes nothing: (state, pending, finished) was {before}, now {after}")
    for token in ids[-2:]:
        the_cursor.advance(token)
    assert automaton.is_accepting(the_cursor.state), "after the refusal, the right tokens still finish the string"


@pytest.mark.task(3)
def test_nothing_follows_eos() -> None:
    the_cursor, _, vocab = cursor("const")
    for token in load_tokenizer("bpe").encode('"東京🫨"'):
        the_cursor.advance(token)
    the_cursor.advance(vocab.eos_token_id)
    before = (the_cursor.state, the_cursor.pending, the_cursor.finished)
    for token in (vocab.eos_token_id, next(i for i, t in enumerate(vocab.tokens) if t == b" ")):
        error = must_raise(lambda t=token: the_cursor.advance(t), TokenRejected,  # type: ignore[misc]
                           f"advance({token}) after EOS")
        assert str(token) in str(error), f"the error must name the refused token {token}: {error}"
    assert (the_cursor.state, the_cursor.pending, the_cursor.finished) == before, (
        "after EOS the output is over: every later token is refused, and the cursor stays as it was")


# Every byte as a token (one byte a token: the hardest case), EOS, and a last token that reads no bytes at all.
ONE_BYTE = Vocabulary(tokens=[*(bytes([b]) for b in range(256)), None, b""], eos_token_id=256)
# A character of every UTF-8 shape: ASCII (DEL the last), each 2-, 3- and 4-byte lead range, the end of Unicode.
EVERY_SHAPE = "a\x7f é\u07ff\u0800\u0fff\u1000\uffff\U00010000🫨\U0010ffff."


@pytest.mark.task(3)
def test_pending_is_what_a_utf8_decoder_still_holds() -> None:
    """One byte a token through a character of every shape: after each, pending holds exactly the bytes of the
    unfinished character, as Python's incremental UTF-8 decoder holds them."""
    any_byte = ByteAutomaton(start=0, accepting=[True], table=[[0] * 256])
    the_cursor, decoder, fed = lab.GrammarCursor(any_byte, ONE_BYTE), codecs.getincrementaldecoder("utf-8")(), b""
    for byte in EVERY_SHAPE.encode():
        the_cursor.advance(byte)
        fed += bytes([byte])
        decoder.decode(bytes([byte]))
        held = decoder.getstate()[0]
        assert the_cursor.pending == held, (
            f"pending holds the bytes of the unfinished character at the end of the output: after {fed!r} that is "
            f"{held!r} (what the standard library's incremental UTF-8 decoder holds), you have {the_cursor.pending!r}")
    the_cursor.advance(len(ONE_BYTE) - 1)  # a token of no bytes
    assert (the_cursor.state, the_cursor.pending) == (0, b""), (
        f"a token with no bytes moves nothing: state 0 and pending b'' stay; you have state {the_cursor.state}, "
        f"pending {the_cursor.pending!r}")


@pytest.mark.task(3)
def test_a_negative_id_is_refused_even_where_the_last_token_could_be_read() -> None:
    any_byte = ByteAutomaton(start=0, accepting=[True], table=[[0] * 256])
    the_cursor = lab.GrammarCursor(any_byte, ONE_BYTE)
    the_cursor.advance(ord("a"))
    before = (the_cursor.state, the_cursor.pending, the_cursor.finished)
    must_raise(lambda: the_cursor.advance(-1), TokenRejected,
               "advance(-1): -1 is no token id (Python would read it as the vocabulary's last token, which every "
               "state here can read)")
    after = (the_cursor.state, the_cursor.pending, the_cursor.finished)
    assert after == before, f"a refused token changes nothing: (state, pending, finished) was {before}, now {after}"


@pytest.mark.task(3)
@given(st.integers(0, 2**16))
@settings(max_examples=30)
def test_advance_follows_the_automaton_on_random_walks(seed: int) -> None:
    the_cursor, automaton, vocab = cursor("weather", "byte")
    rng, state = random.Random(seed), automaton.start
    for _ in range(60):
        allowed = oracle_mask(regex_of("weather"), "byte", state)
        token = rng.choice(allowed)
        the_cursor.advance(token)
        if token == vocab.eos_token_id:
            assert the_cursor.finished, "EOS in an accepting state finishes the output"
            return
        state = walk(automaton, state, vocab.tokens[token] or b"")
        assert the_cursor.state == state, (
            f"advance must land where the automaton's walk over the token's bytes ends: {state}, "
            f"you are in {the_cursor.state}")


# ================================================================ task 4: the index


@pytest.mark.task(4)
@pytest.mark.parametrize("name", ["weather", "nested", "short-cjk"])
def test_index_equals_the_definition_at_every_state(name: str) -> None:
    vocab = family_vocabulary("bpe")
    automaton = oracle_automaton(regex_of(name))
    index = lab.TokenIndex(automaton, vocab, token_trie(vocab))
    for state in range(automaton.num_states):
        mine, want = list(index.allowed(state)), oracle_mask(regex_of(name), "bpe", state)
        assert mine == want, (f"schema {name!r}, state {state}: the index holds each state's mask; "
                              f"{mask_difference(mine, want, vocab)}")


@pytest.mark.task(4)
def test_index_on_tekken_equals_outlines_core() -> None:
    """The whole 131,072-token vocabulary: every state the oracle's walk visits."""
    vocab, regex = family_vocabulary("tekken"), regex_of("const")
    automaton = oracle_automaton(regex)
    index = lab.TokenIndex(automaton, vocab, token_trie(vocab))
    outlines = OutlinesOracle(regex, vocab)
    state = automaton.start
    for token in load_tokenizer("tekken").encode('"東京🫨"'):
        mine, want = list(index.allowed(state)), outlines.mask()
        assert mine == want, f"tekken, state {state}: {mask_difference(mine, want, vocab)}"
        outlines.consume(token)
        state = walk(automaton, state, vocab.tokens[token] or b"")


@pytest.mark.task(4)
def test_index_counts_its_build_work_and_size() -> None:
    vocab = family_vocabulary("bpe")
    automaton = oracle_automaton(regex_of("two-byte-only"))  # small: in the grading sandbox every step is served
    counting = CountingAutomaton(automaton)
    index = lab.TokenIndex(counting, vocab, token_trie(vocab))
    steps = counting.steps  # the build's work (the checks below read masks, which step nothing)
    problem = index_problem([list(index.allowed(s)) for s in range(automaton.num_states)],
                            regex_of("two-byte-only"), vocab, outlines_index(regex_of("two-byte-only"), "bpe"))
    assert problem is None, problem
    budget = sum(trie_steps(automaton, vocab, s) for s in range(automaton.num_states))
    stats = index.stats
    assert stats.states == automaton.num_states, f"stats.states is the number of states indexed: {stats.states}"
    assert stats.steps == steps, (
        f"stats.steps must count the automaton steps the build took: the automaton counted {steps}, "
        f"you report {stats.steps}")
    assert steps <= budget, (
        f"building the index is a pruned trie walk per state at most ({budget} steps); you took {steps}")
    distinct = {tuple(index.allowed(s)) for s in range(automaton.num_states)}
    assert stats.entries == sum(len(m) for m in distinct), (
        f"stats.entries counts the ids of each distinct mask once: {len(distinct)} distinct masks hold "
        f"{sum(len(m) for m in distinct)} ids, you report {stats.entries} entries")


def index_problem(masks: list[list[int]], regex: str, vocab: Vocabulary, oracle: OutlinesOracle) -> str | None:
    """The answer before any count: each state's mask, as the index gives it, against outlines-core's."""
    grammar = library_grammar(regex)
    for state, mine in enumerate(masks):
        want = oracle.mask_at(grammar, state)
        if mine != want:
            return (f"the index holds each state's mask, and a count only means something for an index that is "
                    f"right: at state {state} of {len(masks)} (regex {regex[:40]!r}…), "
                    f"{mask_difference(mine, want, vocab)}")
    return None


@functools.cache
def lowercase_vocabulary() -> Vocabulary:
    """Every single byte, every two- and three-letter lowercase word (18,252 tokens), and EOS.

    Inside a string of lowercase letters a state allows nearly all of it, so a mask there is about
    18,000 ids: a copy per state costs megabytes that sharing one list does not.
    """
    words = [bytes(letters) for size in (2, 3) for letters in itertools.product(range(ord("a"), ord("z") + 1),
                                                                                repeat=size)]
    tokens: list[bytes | None] = [bytes([b]) for b in range(256)]
    tokens += [*words, b'", "', None]
    return Vocabulary(tokens=tokens, eos_token_id=len(tokens) - 1)


STRINGS_IN_A_ROW = 240  # 965 states; the ~240 inside a string each allow the same 18,200 tokens
SHARED_INDEX_MIB = 30  # the grading process may hold this much more than before your file was imported


@pytest.mark.task(4)
def test_index_stores_each_distinct_mask_once() -> None:
    """States that allow the same tokens share one list; measured where your code cannot change the figure."""
    vocab = lowercase_vocabulary()
    regex = r'\["[a-z]*"(, "[a-z]*"){' + str(STRINGS_IN_A_ROW - 1) + r'}\]'
    automaton = oracle_automaton(regex)
    if isinstance(lab, ModuleType):  # here, in the tests' own process: count the integers the index holds
        index = lab.TokenIndex(automaton, vocab, token_trie(vocab))
        masks = [index.allowed(s) for s in range(automaton.num_states)]
        problem = index_problem([list(m) for m in masks], regex, vocab, OutlinesOracle(regex, vocab))
        assert problem is None, problem  # every mask right, before any integer is counted
        distinct = {tuple(m) for m in masks}
        shared = sum(len(m) for m in distinct)
        held = int(install_probe(lab, "Introspection").integers_kept(index))
        budget = 2 * shared + 4 * automaton.num_states  # a mask, a key for it, a few numbers per state
        assert held <= budget, (
            f"store each distinct mask once: {automaton.num_states} states have {len(distinct)} distinct masks "
            f"({shared:,} ids in all; {sum(len(m) for m in masks):,} if every state kept its own copy), and your "
            f"index holds {held:,} integers. States inside strings that read the same way allow the same tokens: "
            "let them share one list")
        return
    # In the grading sandbox: the kernel's count of the grading process's memory, from before your file was
    # imported (so nothing your code sets aside early and gives back later hides what it keeps), with the
    # index built and every state's mask read (a mask copied when it is first asked for counts too).
    lab.restart()
    index = lab.TokenIndex(automaton, vocab, token_trie(vocab))
    masks = [list(index.allowed(s)) for s in range(automaton.num_states)]
    problem = index_problem(masks, regex, vocab, OutlinesOracle(regex, vocab))
    assert problem is None, problem  # every mask right, before the memory is read
    held = lab.memory_in_use()
    distinct = {tuple(m) for m in masks}
    copies = 8 * sum(len(m) for m in masks)  # a list of n ids holds n 8-byte references
    assert held <= SHARED_INDEX_MIB * 2**20, (
        f"store each distinct mask once: {automaton.num_states} states have {len(distinct)} distinct masks, and the "
        f"grading process holds {held / 2**20:.1f} MiB more than before your file was imported (the kernel's "
        f"count; {SHARED_INDEX_MIB} MiB allowed, importing numpy and the engine takes about 12). One list per "
        f"state would hold {copies / 2**20:.1f} MiB of ids. States inside strings that read the same way allow "
        "the same tokens: let them share one list")


# ================================================================ task 5: the sampler


@functools.cache
def recorded_samples() -> dict[str, list[list[Any]]]:
    """The reference sampler's (token, phase) per step for each case (recorded: the reference never ships)."""
    return recorded.load("lab08_samples.json")  # type: ignore[no-any-return]


def sampler_trace(case_name: str) -> tuple[list[Step], bytes]:
    """Your sampler on a recorded case, step by step beside the recorded choices; and the bytes you wrote."""
    case, expected = SAMPLER_CASES[case_name], recorded_samples()[case_name]
    vocab = family_vocabulary(case.family)
    mine = sampler_run(case, lab.StructuredSampler, expected=expected)

    def shown(token: int, phase: str) -> str:
        raw = b"" if token == vocab.eos_token_id else vocab.tokens[token] or b""
        return f"{phase}: {'EOS' if token == vocab.eos_token_id else quote(raw.decode('utf-8', 'replace'))}"
    steps = []
    for k, (token, phase) in enumerate(mine):
        raw = b"" if token == vocab.eos_token_id else vocab.tokens[token] or b""
        want = shown(*expected[k]) if k < len(expected) else "(the reply had ended)"
        steps.append(Step(str(token), raw, shown(token, phase), want))
    if len(mine) < len(expected) and all(s.emitted == s.expected for s in steps):
        steps.append(Step("…", b"", f"{mine[-1][1]} (you stopped)" if mine else "nothing", shown(*expected[len(mine)])))
    output = b"".join(vocab.tokens[t] or b"" for t, _ in mine if t != vocab.eos_token_id)
    return steps, output


@pytest.mark.task(5)
@pytest.mark.parametrize("family", ["byte", "bpe", "spm"])
def test_masked_reply_is_valid_json_for_the_schema(family: str) -> None:
    steps, output = sampler_trace(f"json {family}")
    assert all(s.emitted == s.expected for s in steps), format_trace(
        steps, "no thought here: from the first token, choose the best-scored token the mask allows (lowest id on "
        "a tie), until EOS", columns=("your phase: token", "reference's"), inputs=("chosen", "bytes"))
    reply = json.loads(output.decode("utf-8"))
    jsonschema.validate(reply, WEATHER)


@pytest.mark.task(5)
def test_thought_runs_free_then_the_reply_follows_the_schema() -> None:
    steps, output = sampler_trace("thought then json")
    assert all(s.emitted == s.expected for s in steps), format_trace(
        steps, "the mask applies only after the thought ends (</think>, lab-06's rule): the thought is the model's "
        "own choice, then every token is masked", columns=("your phase: token", "reference's"),
        inputs=("chosen", "bytes"))
    thought, _, answer = output.decode("utf-8").partition("</think>")
    assert "東京 is 18 degrees" in thought, f"the thought must be what the model wanted to say: {quote(thought)}"
    jsonschema.validate(json.loads(answer), WEATHER)


@pytest.mark.task(5)
def test_a_forced_call_ends_the_thought_where_it_begins() -> None:
    """lab-06's other rule: a call that begins without </think> ends the thought, and the tag is the call's."""
    steps, output = sampler_trace("thought then forced call")
    assert all(s.emitted == s.expected for s in steps), format_trace(
        steps, "with implicit_end=b'<tool_call>', the thought also ends where that tag begins, and the grammar "
        "reads the tag: the thought is free, the call is masked", columns=("your phase: token", "reference's"),
        inputs=("chosen", "bytes"))
    thought, tag, call = output.decode("utf-8").partition("<tool_call>")
    assert "I should call the tool" in thought and tag, f"the thought is the model's own: {quote(thought)}"
    arguments = json.loads(call.strip().removesuffix("</tool_call>").strip())["arguments"]
    jsonschema.validate(arguments, CALL_PARAMETERS)


@pytest.mark.task(5)
def test_a_sampler_starts_constrained_unless_told_the_reply_opens_a_thought() -> None:
    sampler = lab.StructuredSampler(no_newline_automaton(), LOW_EOS, lambda s: [3, 5])
    scores = [0.0, 9.0, 0.0, 2.0, 0.0, 1.0, 0.0, 0.0]  # token 1 scores best, but the mask allows 3 and 5 only
    chosen = sampler.choose(scores)
    assert (chosen, sampler.phase) == (3, "constrained"), (
        f"thinking=False is the default: a reply that does not open with a thought is masked from its first token, "
        f"so of the allowed 3 and 5 the better, 3; you chose {chosen}, phase {sampler.phase!r}")


@pytest.mark.task(5)
def test_sampler_picks_the_best_allowed_token() -> None:
    sampler = lab.StructuredSampler(no_newline_automaton(), LOW_EOS, lambda s: [3, 5, 7])
    scores = [0.0, 9.0, 0.0, 2.0, 0.0, 2.0, 0.0, 1.0]  # 1 is best but not allowed; 3 and 5 tie for the best allowed
    chosen = sampler.choose(scores)
    assert chosen == 3, (
        f"choose the best score the mask allows, and on a tie the lowest id: of the allowed 3, 5 and 7, tokens 3 and 5 "
        f"both score 2.0, so 3; you chose {chosen}")


@pytest.mark.task(5)
def test_nothing_is_chosen_after_eos_or_where_no_token_is_allowed() -> None:
    sampler = lab.StructuredSampler(no_newline_automaton(), LOW_EOS, lambda s: [0, 5])
    scores = [0.0] * len(LOW_EOS)
    scores[0] = 1.0  # EOS scores best
    assert sampler.choose(scores) == 0 and sampler.phase == "done", "EOS is allowed and best: it is chosen, phase done"
    must_raise(lambda: sampler.choose(scores), RuntimeError, "choose() after EOS (the output is over)")
    stuck = lab.StructuredSampler(no_newline_automaton(), LOW_EOS, lambda s: [])
    error = must_raise(lambda: stuck.choose(scores), RuntimeError,
                       "choose() in a state whose mask is empty (the grammar cannot go on)")
    assert "0" in str(error), f"the error must name the state (0) where no token is allowed: {error}"


@pytest.mark.task(5)
def test_samplers_over_many_vocabularies_each_think_in_their_own() -> None:
    """A server makes a sampler per reply over its model's vocabulary: with twelve vocabularies' samplers alive at
    once (more than a per-vocabulary memo should keep), each free choice is among its own ordinary tokens."""
    size = 12
    vocabs = [Vocabulary(tokens=[b"x" if i == k + 1 else None for i in range(size + 1)], eos_token_id=0)
              for k in range(size)]  # vocabulary k: one ordinary token, id k + 1; every other id is special
    samplers = [lab.StructuredSampler(no_newline_automaton(), vocab, lambda s: [], thinking=True) for vocab in vocabs]
    chosen = [sampler.choose([1.0 if data is not None else 5.0 for data in vocab.tokens])
              for sampler, vocab in zip(samplers, vocabs, strict=True)]
    assert chosen == list(range(1, size + 1)), (
        "while thinking, the choice is free among the vocabulary's own ordinary tokens (a special token, None in "
        f"tokens, is never chosen, however well it scores): the twelve samplers chose {chosen}, each should choose "
        f"its vocabulary's one ordinary token, {list(range(1, size + 1))}")


# A vocabulary made for the thinking-phase rule: tokens that end a thought with a rest after the tag (and every
# single byte after them, so any text can be spelled).
ENDINGS = [None, b"</think", b">junk", b">{", b"hm", b"<tool_call>x", b"<tool_call>{", b"<tool", b">xab", b">ab",
           b"</think> <tool_call>{", b"</think><tool_call>{", *(bytes([b]) for b in range(256))]
ENDING_CASES = {
    # (the thought so far (None: the reply starts here), the next scores, the rest the best token hands the grammar,
    # the right choice, the grammar, implicit_end)
    "after </think>": (b"</think", {b">junk": 9.0, b">{": 8.0, b">": 7.0}, b"junk", b">{", r"\{\}", None),
    "at <tool_call>": (b"hm", {b"<tool_call>x": 9.0, b"<tool_call>{": 8.5, b"<tool": 8.0}, b"<tool_call>x",
                       b"<tool_call>{", r"<tool_call>\{\}", b"<tool_call>"),
    # the first tag ends the thought: after </think> even a later <tool_call> is the grammar's to read
    "first-tag-wins": (None, {b"</think> <tool_call>{": 9.0, b"</think><tool_call>{": 8.0}, b" <tool_call>{",
                       b"</think><tool_call>{", r"<tool_call>\{\}", b"<tool_call>"),
}


@pytest.mark.task(5)
@pytest.mark.parametrize("case", ENDING_CASES)
def test_a_thought_never_ends_with_a_rest_the_grammar_refuses(case: str) -> None:
    """The token that ends a thought hands its rest to the grammar: if the grammar cannot read it, the next best."""
    before, scored, rest, want, regex, implicit_end = ENDING_CASES[case]
    vocab = Vocabulary(tokens=list(ENDINGS), eos_token_id=0)
    grammar, masks = library_grammar(regex), OutlinesOracle(regex, vocab)
    sampler = lab.StructuredSampler(grammar.automaton, vocab, lambda s: masks.mask_at(grammar, s), thinking=True,
                                    implicit_end=implicit_end)
    if before is not None:
        scores = [0.0] * len(vocab)
        scores[ENDINGS.index(before)] = 1.0
        first = sampler.choose(scores)
        assert (first, sampler.phase) == (ENDINGS.index(before), "thinking"), (
            f"while thinking, the best token is the model's own ({before!r}), and the thought goes on; you chose "
            f"{vocab.tokens[first]!r}, phase {sampler.phase!r}")
    scores = [0.0] * len(vocab)
    for token, score in scored.items():
        scores[ENDINGS.index(token)] = score
    chosen = sampler.choose(scores)
    best = max(scored, key=scored.__getitem__)
    assert (vocab.tokens[chosen], sampler.phase) == (want, "constrained"), (
        f"thinking, after {before!r}: {best!r} scores best, but it ends the thought and hands the grammar "
        f"({regex}) the rest {rest!r}, which it cannot read. Take the next best whose rest it can read ({want!r}), "
        f"and move to 'constrained'; you chose {vocab.tokens[chosen]!r}, phase {sampler.phase!r}")


@pytest.mark.task(5)
def test_a_refused_byte_ends_the_walk_of_a_thoughts_rest() -> None:
    """The rest "xab" dies at "x": what follows cannot revive it, though the grammar reads "ab" from its other state
    (DEAD is -1, and a walk that goes on steps from table[-1], the last state's row)."""
    start, after_a = 0, 1  # (ab)*, by hand: start reads "a", the next state "b"
    table = [[DEAD] * 256, [DEAD] * 256]
    table[start][ord("a")], table[after_a][ord("b")] = after_a, start
    vocab = Vocabulary(tokens=list(ENDINGS), eos_token_id=0)
    sampler = lab.StructuredSampler(ByteAutomaton(start=start, accepting=[True, False], table=table), vocab,
                                    lambda s: [], thinking=True)
    scores = [0.0] * len(vocab)
    scores[ENDINGS.index(b"</think")] = 1.0
    sampler.choose(scores)
    scores = [0.0] * len(vocab)
    scores[ENDINGS.index(b">xab")], scores[ENDINGS.index(b">ab")] = 9.0, 8.0
    chosen = sampler.choose(scores)
    assert (vocab.tokens[chosen], sampler.phase, sampler.state) == (b">ab", "constrained", start), (
        f"thinking, after b'</think': b'>xab' scores best but hands the grammar (ab)* the rest b'xab', refused at its "
        f"first byte, and a refused byte is final; b'>ab' is next best and its rest leads back to the start state. "
        f"You chose {vocab.tokens[chosen]!r}, phase {sampler.phase!r}, state {sampler.state}")


# ================================================================ control


@pytest.mark.control
def test_unconstrained_toy_model_breaks_the_schema() -> None:
    """Greedy over the same scores, no mask: the model's chatty reply is not JSON at all."""
    bpe = load_tokenizer("bpe")
    ids: list[int]
    model, ids = ToyModel(bpe), []
    for _ in range(300):
        scores = model.scores("the weather in Tokyo as json, please", ids)
        best = max(range(len(scores)), key=scores.__getitem__)
        if best == bpe.eos_token_id:
            break
        ids.append(best)
    reply = bpe.decode(ids)
    assert json.dumps(WEATHER_JSON, ensure_ascii=False) in reply, "the reply holds the right object..."
    with pytest.raises(json.JSONDecodeError):
        json.loads(reply)  # ... wrapped in prose, so a client's parse fails
