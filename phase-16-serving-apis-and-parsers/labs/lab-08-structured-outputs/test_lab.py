"""Lab 08 tests: token masks from a grammar over characters, on vocabularies of bytes.

Run against your code:  make lab-08
Every graded test is marked with the task it grades. Each task is tested on inputs the tests
build themselves (the byte automaton of tasks 2-5 comes from the oracle lifting in
mini_vllm.testing.structured, not from your task 1), so a bug costs points where it lives.
Oracles: the definition (walk every token), outlines-core's index and llguidance's matcher,
all configured to the same regular expression.
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
from mini_vllm.constraints import tool_call_constraint
from mini_vllm.grammar import regex_to_chars, schema_to_regex
from mini_vllm.labs import load_lab
from mini_vllm.labtypes.lab08 import DEAD, ByteAutomaton, CharAutomaton, TokenRejected, Vocabulary
from mini_vllm.testing.expect import must_raise
from mini_vllm.testing.structured import (
    CountingAutomaton,
    GuidanceOracle,
    OutlinesOracle,
    family_vocabulary,
    first_difference,
    oracle_bytes,
    oracle_mask,
    trie_steps,
    walk,
)
from mini_vllm.testing.trace import Step, format_trace, quote
from mini_vllm.toy_model import WEATHER_JSON, ToyModel

lab = load_lab("lab-08")

TASKS = {
    1: "lift_to_bytes: the character automaton as UTF-8 byte ranges",
    2: "TokenMasker: the tokens a state can read (scan, then trie walk)",
    3: "GrammarCursor.advance: consume a token, carry a partial character, refuse cleanly",
    4: "TokenIndex: every state's mask, precomputed and counted",
    5: "StructuredSampler: the masked choice, only after the thought",
}

WEATHER: dict[str, Any] = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "maxLength": 8},
        "temperature": {"type": "integer"},
        "unit": {"enum": ["celsius", "fahrenheit"]},
        "note": {"type": "string"},
    },
    "required": ["city", "temperature", "unit", "note"],
    "additionalProperties": False,
}
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


@functools.cache
def oracle_automaton(regex: str) -> ByteAutomaton:
    return oracle_bytes(chars_of(regex))


@functools.cache
def regex_of(name: str) -> str:
    return schema_to_regex(SCHEMAS[name]) if name in SCHEMAS else CLASSES[name]


def mask_text(mask: Sequence[int], vocab: Vocabulary, limit: int = 3) -> str:
    """A mask in a table cell: its size and its first few tokens."""
    shown = ", ".join("EOS" if i == vocab.eos_token_id else repr(vocab.tokens[i])[1:] for i in list(mask)[:limit])
    return f"{len(mask)} tokens: {shown}{', …' if len(mask) > limit else ''}"


def mask_difference(mine: Sequence[int], want: Sequence[int], vocab: Vocabulary) -> str:
    extra, missing = sorted(set(mine) - set(want)), sorted(set(want) - set(mine))
    def names(ids: list[int]) -> str:
        return ", ".join("EOS" if i == vocab.eos_token_id else f"{i} {vocab.tokens[i]!r}" for i in ids[:6]) + (
            " …" if len(ids) > 6 else "")
    return (f"you allow {len(extra)} it refuses ({names(extra)}); " if extra else "") + (
        f"you refuse {len(missing)} it allows ({names(missing)})" if missing else "")


def language_problem(mine: ByteAutomaton, regex: str, rule: str) -> str | None:
    """None when ``mine`` reads exactly the oracle's language; else the rule and the shortest input that differs."""
    difference = first_difference(mine, oracle_automaton(regex))
    if difference is None:
        return None
    path = difference.path
    steps = [Step(f"byte {k + 1}", path[k:k + 1], "reads it", "reads it") for k in range(len(path) - 1)]
    steps.append(Step("end" if difference.theirs.endswith("string") else f"byte {len(path)}",
                      path[-1:] if not difference.theirs.endswith("string") else b"",
                      difference.theirs, difference.oracle))
    text = path.decode("utf-8", "replace")
    return format_trace(steps, f"{rule}\nregex {regex!r}: the shortest input read differently is "
                        f"{path.hex(' ') or 'empty'} ({quote(text)})", columns=("yours", "oracle"))


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
def code_point_classes(draw: st.DrawFn) -> CharAutomaton:
    """One state, one class to an accepting state: ranges drawn around the UTF-8 length edges."""
    edges = [0, 0x7F, 0x80, 0x7FF, 0x800, 0xD7FF, 0xD800, 0xDFFF, 0xE000, 0xFFFF, 0x10000, 0x10FFFF]
    points = draw(st.lists(st.sampled_from(edges) | st.integers(0, 0x10FFFF), min_size=2, max_size=8, unique=True))
    points.sort()
    ranges = [(points[i], points[i + 1], 1) for i in range(0, len(points) - 1, 2)]
    return CharAutomaton(start=0, accepting=(1,), transitions=(tuple(ranges), ()))


@pytest.mark.task(1)
@given(code_point_classes())
@settings(max_examples=60)
def test_any_ranges_lift_exactly(chars: CharAutomaton) -> None:
    mine, oracle = lab.lift_to_bytes(chars), oracle_bytes(chars)
    difference = first_difference(mine, oracle)
    assert difference is None, (
        f"the class {[(hex(a), hex(b)) for a, b, _ in chars.transitions[0]]} must read exactly the UTF-8 of its "
        f"code points: on {difference.path.hex(' ')} you {difference.theirs}, the oracle {difference.oracle}")


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
    masker = lab.TokenMasker(automaton, vocab)
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
    masker = lab.TokenMasker(automaton, vocab)
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
    mine, want = lab.TokenMasker(automaton, vocab).mask(state), oracle_mask(automaton, vocab, state)
    assert mine == want, (
        f"after F0 9F only tokens that go on with continuation bytes (and finish the character) are allowed: "
        f"{mask_difference(mine, want, vocab)}")


@pytest.mark.task(2)
@pytest.mark.parametrize("family", ["byte", "bpe"])
def test_eos_exactly_when_accepting(family: str) -> None:
    vocab = family_vocabulary(family)
    automaton = oracle_automaton(regex_of("weather"))
    masker = lab.TokenMasker(automaton, vocab)
    wrong = [state for state in range(automaton.num_states)
             if (vocab.eos_token_id in masker.mask(state)) != automaton.is_accepting(state)]
    assert not wrong, (f"EOS ends the output, so it is allowed exactly in accepting states: wrong in states "
                       f"{wrong[:8]} (accepting: {[automaton.is_accepting(s) for s in wrong[:8]]})")


@pytest.mark.task(2)
@pytest.mark.parametrize("name", ["weather", "short-cjk"])
def test_trie_walk_prunes_dead_prefixes(name: str) -> None:
    """Count the automaton steps a mask takes: one per child of each readable prefix, no more."""
    vocab = family_vocabulary("bpe")
    automaton = oracle_automaton(regex_of(name))
    for state in range(0, automaton.num_states, 3):
        counting = CountingAutomaton(automaton)
        mine = lab.TokenMasker(counting, vocab).mask(state)
        budget = trie_steps(automaton, vocab, state)
        assert mine == oracle_mask(automaton, vocab, state), f"state {state}: the mask itself is wrong"
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


@pytest.mark.task(3)
@pytest.mark.parametrize("pick", REFUSED.values(), ids=REFUSED.keys())
def test_refused_token_raises_and_changes_nothing(pick: Any) -> None:
    the_cursor, automaton, vocab = cursor("const")
    bpe = load_tokenizer("bpe")
    ids = bpe.encode('"東京🫨"')
    for token in ids[:-2]:  # stop inside 🫨 (after f0 9f): a partial character is held
        the_cursor.advance(token)
    before = (the_cursor.state, the_cursor.pending, the_cursor.finished)
    bad = pick(vocab, automaton, the_cursor.state)
    error = must_raise(lambda: the_cursor.advance(bad), TokenRejected, f"advance({bad})")
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
        error = must_raise(lambda t=token: the_cursor.advance(t), TokenRejected, f"advance({token}) after EOS")
        assert str(token) in str(error), f"the error must name the refused token {token}: {error}"
    assert (the_cursor.state, the_cursor.pending, the_cursor.finished) == before, (
        "after EOS the output is over: every later token is refused, and the cursor stays as it was")


@pytest.mark.task(3)
@given(st.integers(0, 2**16))
@settings(max_examples=30)
def test_advance_follows_the_automaton_on_random_walks(seed: int) -> None:
    the_cursor, automaton, vocab = cursor("weather", "byte")
    rng, state = random.Random(seed), automaton.start
    for _ in range(60):
        allowed = oracle_mask(automaton, vocab, state)
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
    index = lab.TokenIndex(automaton, vocab)
    for state in range(automaton.num_states):
        mine, want = list(index.allowed(state)), oracle_mask(automaton, vocab, state)
        assert mine == want, (f"schema {name!r}, state {state}: the index holds each state's mask; "
                              f"{mask_difference(mine, want, vocab)}")


@pytest.mark.task(4)
def test_index_on_tekken_equals_outlines_core() -> None:
    """The whole 131,072-token vocabulary: every state the oracle's walk visits."""
    vocab, regex = family_vocabulary("tekken"), regex_of("const")
    automaton = oracle_automaton(regex)
    index = lab.TokenIndex(automaton, vocab)
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
    automaton = oracle_automaton(regex_of("length-edges"))  # small: in the grading sandbox every step is served
    counting = CountingAutomaton(automaton)
    index = lab.TokenIndex(counting, vocab)
    budget = sum(trie_steps(automaton, vocab, s) for s in range(automaton.num_states))
    stats = index.stats
    assert stats.states == automaton.num_states, f"stats.states is the number of states indexed: {stats.states}"
    assert stats.steps == counting.steps, (
        f"stats.steps must count the automaton steps the build took: the automaton counted {counting.steps}, "
        f"you report {stats.steps}")
    assert counting.steps <= budget, (
        f"building the index is a pruned trie walk per state at most ({budget} steps); you took {counting.steps}")
    distinct = {tuple(index.allowed(s)) for s in range(automaton.num_states)}
    assert stats.entries == sum(len(m) for m in distinct), (
        f"store each distinct mask once (states inside a string share one): {len(distinct)} distinct masks hold "
        f"{sum(len(m) for m in distinct)} ids, you report {stats.entries} entries")


# ================================================================ task 5: the sampler


def oracle_sample(automaton: ByteAutomaton, vocab: Vocabulary, score_rows: Any, thinking: bool,
                  implicit_end: bytes | None = None, limit: int = 400) -> list[tuple[int, str]]:
    """The rule, written plainly: (token, phase after it) per step, greedy, lowest id on ties.

    While thinking: the best ordinary token, unless it ends the thought (at </think>, or where
    ``implicit_end`` begins) with a rest the grammar cannot read. After: the best token of the
    oracle's mask.
    """
    ordinary = [i for i, t in enumerate(vocab.tokens) if t is not None]
    phase, state, seen, out = ("thinking" if thinking else "constrained"), automaton.start, b"", []
    for _ in range(limit):
        scores = score_rows([t for t, _ in out])
        if phase == "thinking":
            for token in sorted(ordinary, key=lambda i: (-scores[i], i)):
                data = seen + (vocab.tokens[token] or b"")  # the whole thought so far: plain, not fast
                ends = [(data.find(b"</think>"), data.find(b"</think>") + 8)]
                if implicit_end:
                    ends.append((data.find(implicit_end), data.find(implicit_end)))
                found = sorted((at, rest) for at, rest in ends if at >= 0)
                if not found:
                    seen = data
                    break
                after = walk(automaton, automaton.start, data[found[0][1]:])
                if after != DEAD:
                    phase, state = "constrained", after
                    break
        else:
            allowed = oracle_mask(automaton, vocab, state)
            token = min(allowed, key=lambda i: (-scores[i], i))
            if token == vocab.eos_token_id:
                phase = "done"
            else:
                state = walk(automaton, state, vocab.tokens[token] or b"")
        out.append((token, phase))
        if phase == "done":
            break
    return out


def sampler_trace(family: str, message: str, thinking: bool, regex: str | None = None,
                  implicit_end: bytes | None = None) -> tuple[list[Step], bytes]:
    vocab = family_vocabulary(family)
    automaton = oracle_automaton(regex or regex_of("weather"))
    model = ToyModel(load_tokenizer(family))
    rows = functools.partial(model.scores, message, opened_thought=thinking)
    expected = oracle_sample(automaton, vocab, rows, thinking, implicit_end)
    sampler = lab.StructuredSampler(automaton, vocab, lambda s: oracle_mask(automaton, vocab, s), thinking=thinking,
                                    implicit_end=implicit_end)
    steps, ids = [], []
    for want_token, want_phase in expected:
        token = sampler.choose(rows(ids))
        ids.append(token)
        raw = b"" if token == vocab.eos_token_id else vocab.tokens[token] or b""
        want_raw = b"" if want_token == vocab.eos_token_id else vocab.tokens[want_token] or b""
        steps.append(Step(str(token), raw, f"{sampler.phase}: {quote(raw.decode('utf-8', 'replace'))}",
                          f"{want_phase}: {quote(want_raw.decode('utf-8', 'replace'))}"))
        if steps[-1].emitted != steps[-1].expected:
            break
    output = b"".join(vocab.tokens[t] or b"" for t in ids if t != vocab.eos_token_id)
    return steps, output


@pytest.mark.task(5)
@pytest.mark.parametrize("family", ["byte", "bpe", "spm"])
def test_masked_reply_is_valid_json_for_the_schema(family: str) -> None:
    steps, output = sampler_trace(family, "the weather in Tokyo as json, please", thinking=False)
    assert all(s.emitted == s.expected for s in steps), format_trace(
        steps, "no thought here: from the first token, choose the best-scored token the mask allows (lowest id on "
        "a tie), until EOS", columns=("your phase: token", "oracle's"), inputs=("chosen", "bytes"))
    reply = json.loads(output.decode("utf-8"))
    jsonschema.validate(reply, WEATHER)


@pytest.mark.task(5)
def test_thought_runs_free_then_the_reply_follows_the_schema() -> None:
    steps, output = sampler_trace("bpe", "think json: the weather in Tokyo", thinking=True)
    assert all(s.emitted == s.expected for s in steps), format_trace(
        steps, "the mask applies only after the thought ends (</think>, lab-06's rule): the thought is the model's "
        "own choice, then every token is masked", columns=("your phase: token", "oracle's"), inputs=("chosen", "bytes"))
    thought, _, answer = output.decode("utf-8").partition("</think>")
    assert "東京 is 18 degrees" in thought, f"the thought must be what the model wanted to say: {quote(thought)}"
    jsonschema.validate(json.loads(answer), WEATHER)


CALL_PARAMETERS: dict[str, Any] = {
    "type": "object", "additionalProperties": False, "required": ["city", "unit", "note"],
    "properties": {"city": {"type": "string", "maxLength": 8}, "unit": {"enum": ["celsius", "fahrenheit"]},
                   "note": {"type": "string"}}}


@pytest.mark.task(5)
def test_a_forced_call_ends_the_thought_where_it_begins() -> None:
    """lab-06's other rule: a call that begins without </think> ends the thought, and the tag is the call's."""
    regex = tool_call_constraint([("get_weather", CALL_PARAMETERS)], "tools").regex
    steps, output = sampler_trace("bpe", "think then call", thinking=True, regex=regex,
                                  implicit_end=b"<tool_call>")
    assert all(s.emitted == s.expected for s in steps), format_trace(
        steps, "with implicit_end=b'<tool_call>', the thought also ends where that tag begins, and the grammar "
        "reads the tag: the thought is free, the call is masked", columns=("your phase: token", "oracle's"),
        inputs=("chosen", "bytes"))
    thought, tag, call = output.decode("utf-8").partition("<tool_call>")
    assert "I should call the tool" in thought and tag, f"the thought is the model's own: {quote(thought)}"
    arguments = json.loads(call.strip().removesuffix("</tool_call>").strip())["arguments"]
    jsonschema.validate(arguments, CALL_PARAMETERS)


@pytest.mark.task(5)
def test_sampler_picks_the_best_allowed_token() -> None:
    vocab = family_vocabulary("byte")
    automaton = oracle_automaton(regex_of("weather"))
    sampler = lab.StructuredSampler(automaton, vocab, lambda s: oracle_mask(automaton, vocab, s))
    scores = [0.0] * len(vocab)
    scores[ord("S")], scores[ord("{")], scores[ord("[")] = 9.0, 1.0, 1.0
    first = sampler.choose(scores)
    assert first == ord("{"), (
        f"'S' scores best but the schema needs '{{' first: choose the best token the mask allows, got "
        f"{vocab.tokens[first]!r}")
    scores = [0.5] * len(vocab)
    second = sampler.choose(scores)
    allowed = oracle_mask(automaton, vocab, walk(automaton, automaton.start, b"{"))
    assert second == min(allowed), f"on a tie, the lowest allowed id wins ({min(allowed)}), got {second}"


# ================================================================ control


@pytest.mark.control
def test_unconstrained_toy_model_breaks_the_schema() -> None:
    """Greedy over the same scores, no mask: the model's chatty reply is not JSON at all."""
    bpe = load_tokenizer("bpe")
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
