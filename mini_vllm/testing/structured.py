"""lab-08's oracles and trusted helpers: what the tests, the notebook and the bench compare against.

Nothing here answers a task: every oracle is a library or a property.

- :func:`library_grammar` compiles a regular expression with outlines-core over a vocabulary of
  the 256 single bytes: its DFA, read back as a :class:`ByteAutomaton` (tasks 2-5 run on it, and
  task 1's lifting is compared with it), with the library's own state for each of its states, so
  :class:`OutlinesOracle` can give outlines-core's mask at any of them.
- :class:`OutlinesOracle` and :class:`GuidanceOracle` compute masks with outlines-core's
  index and llguidance's matcher, configured to the same regular expression.
- :func:`lifting_difference` checks task 1 against llguidance: the shortest byte string a lifted
  automaton reads differently from llguidance's matcher over the 256 single bytes, found breadth
  first; which inputs are the same to the grammar is told by the stdlib's UTF-8 decoder (the
  characters decoded so far and the bytes of the unfinished one), never by a second lifting.
- :func:`first_difference` compares two byte automata by their languages (the shortest input
  read differently); :func:`trie_steps` counts what a pruned trie walk may cost.
- :class:`CountingAutomaton` is a byte automaton that counts the steps asked of it, so a
  mask's cost is counted on the tests' side, where code under test cannot touch the count.
"""

from __future__ import annotations

import codecs
import functools
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from mini_vllm.grammars.constraints import tool_call_constraint
from mini_vllm.grammars.grammar import schema_to_regex, vocabulary_of
from mini_vllm.grammars.library import _BYTE_EOS, LibraryGrammar, rust_regex  # noqa: F401 (the kit's names)
from mini_vllm.grammars.library import library_grammar as library_grammar  # (the kit's, for the lab tests)
from mini_vllm.labtypes.lab08 import (
    DEAD,
    TOOL_CALL_START,
    ByteAutomaton,
    CharAutomaton,
    Vocabulary,
    kept_per_vocabulary,
)
from mini_vllm.tokenizers.families import load_tokenizer
from mini_vllm.toy_model import ToyModel


@functools.cache
def family_vocabulary(family: str) -> Vocabulary:
    """A tokenizer family's vocabulary as data (cached: Tekken's takes two seconds)."""
    return vocabulary_of(load_tokenizer(family))


def class_regex(ranges: Sequence[tuple[int, int]]) -> str:
    """A character class of code-point ranges, for outlines-core (surrogates are no characters: left out)."""
    parts = []
    for lo, hi in ranges:
        for a, b in ((lo, min(hi, 0xD7FF)), (max(lo, 0xE000), hi)):
            if a <= b:
                parts.append(f"\\x{{{a:x}}}-\\x{{{b:x}}}")
    return f"[{''.join(parts)}]" if parts else "[^\\x{0}-\\x{10ffff}]"


@dataclass(frozen=True)
class Difference:
    """The shortest byte string on which two automata disagree, and how."""

    path: bytes
    theirs: str  # what the automaton under test does with the last byte ("reads" / "refuses"), or at the end
    oracle: str

    def sentence(self) -> str:
        """'you read it, the oracle refuses it', or the same about the whole string."""
        def clause(who: str, verb: str) -> str:
            if verb in ("reads", "refuses"):
                return f"{who} {verb.removesuffix('s') if who == 'you' else verb} it"
            return f"{who} {'call' if who == 'you' else 'calls'} it {verb}"
        return f"{clause('you', self.theirs)}, {clause('the oracle', self.oracle)}"


def first_difference(mine: ByteAutomaton, oracle: ByteAutomaton) -> Difference | None:
    """Breadth-first over pairs of states: the shortest input read differently, or None if the languages agree."""
    start = (mine.start, oracle.start)
    parent: dict[tuple[int, int], tuple[tuple[int, int], int] | None] = {start: None}
    queue = deque([start])

    def path_to(pair: tuple[int, int]) -> bytes:
        out = []
        while (link := parent[pair]) is not None:
            pair, byte = link
            out.append(byte)
        return bytes(reversed(out))

    while queue:
        pair = queue.popleft()
        a, b = pair
        if mine.is_accepting(a) != oracle.is_accepting(b):
            verdict = ("a whole string", "not a whole string")
            return Difference(path_to(pair), verdict[not mine.is_accepting(a)], verdict[not oracle.is_accepting(b)])
        for byte in range(256):
            x, y = mine.step(a, byte), oracle.step(b, byte)
            if (x == DEAD) != (y == DEAD):
                reads = ("reads", "refuses")
                return Difference(path_to(pair) + bytes([byte]), reads[x == DEAD], reads[y == DEAD])
            if x != DEAD and (x, y) not in parent:
                parent[(x, y)] = (pair, byte)
                queue.append((x, y))
    return None


@functools.cache
def guidance_bytes(regex: str) -> GuidanceBytes:
    """One matcher per regular expression: :meth:`GuidanceBytes.after` leaves it where it found it."""
    return GuidanceBytes(regex)


class GuidanceBytes:
    """llguidance's matcher for ``regex`` over the single-byte vocabulary: what a byte string may go on with."""

    def __init__(self, regex: str) -> None:
        vocab = family_vocabulary("byte")
        self.oracle = GuidanceOracle(regex, vocab)
        self.id_of = {data[0]: i for i, data in enumerate(vocab.tokens) if data is not None and len(data) == 1}
        self.eos = vocab.eos_token_id

    def after(self, path: bytes) -> tuple[frozenset[int], bool]:
        """(the bytes that may follow ``path``, whether ``path`` is a whole string); ``path`` must be readable."""
        matcher = self.oracle.matcher
        for byte in path:
            self.oracle.consume(self.id_of[byte])
        bits = matcher.compute_bitmask()
        matcher.rollback(len(path))

        def allowed(token: int) -> bool:
            return bool(bits[token >> 3] >> (token & 7) & 1)
        return frozenset(b for b, token in self.id_of.items() if allowed(token)), allowed(self.eos)


def _after_byte(chars: CharAutomaton, state: int, tail: bytes, byte: int) -> tuple[int, bytes]:
    """(character state, bytes of the unfinished character) after one more byte: the stdlib's decoder says
    whether the byte finishes a character. Only called on bytes the oracle reads, so it never meets bad UTF-8."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    decoder.setstate((tail, 0))
    text = decoder.decode(bytes([byte]))
    for character in text:
        state = next((t for lo, hi, t in chars.transitions[state] if lo <= ord(character) <= hi), DEAD)
    return state, decoder.getstate()[0]


def lifting_difference(mine: ByteAutomaton, chars: CharAutomaton, regex: str) -> Difference | None:
    """The shortest byte string ``mine`` reads differently from llguidance's matcher for ``regex`` (whose
    character automaton is ``chars``), or None when they read the same language.

    Breadth first over (a state of ``mine``, the character state, how many bytes of an unfinished character):
    each is checked on the first (shortest) input that reaches it, all 256 next bytes and the end.
    """
    if not regex_reads_something(chars):  # a class of surrogates only: llguidance has no grammar for it
        opened = next((b for b in range(256) if mine.step(mine.start, b) != DEAD), None)
        if opened is not None:
            return Difference(bytes([opened]), "reads", "refuses")
        return Difference(b"", "a whole string", "not a whole string") if mine.is_accepting(mine.start) else None
    oracle = guidance_bytes(regex)
    start = (mine.start, chars.start, 0)
    found: dict[tuple[int, int, int], tuple[bytes, bytes]] = {start: (b"", b"")}  # key -> (input, unfinished bytes)
    queue = deque([start])
    while queue:
        key = queue.popleft()
        here, character_state, _ = key
        path, tail = found[key]
        readable, whole = oracle.after(path)
        if mine.is_accepting(here) != whole:
            verdict = ("a whole string", "not a whole string")
            return Difference(path, verdict[not mine.is_accepting(here)], verdict[not whole])
        for byte in range(256):
            there = mine.step(here, byte)
            if (there == DEAD) == (byte in readable):
                return Difference(path + bytes([byte]), "refuses" if there == DEAD else "reads",
                                  "reads" if byte in readable else "refuses")
            if there != DEAD:
                next_state, next_tail = _after_byte(chars, character_state, tail, byte)
                after = (there, next_state, len(next_tail))
                if after not in found:
                    found[after] = (path + bytes([byte]), next_tail)
                    queue.append(after)
    return None


def regex_reads_something(chars: CharAutomaton) -> bool:
    """Whether any character leaves the start state (a class of surrogates only has none that UTF-8 can write)."""
    return any(lo <= hi and not (lo >= 0xD800 and hi <= 0xDFFF) for lo, hi, _ in chars.transitions[chars.start]) \
        or chars.start in chars.accepting


def walk(automaton: ByteAutomaton, state: int, data: bytes) -> int:
    for byte in data:
        state = automaton.step(state, byte)
        if state == DEAD:
            return DEAD
    return state


class CountingAutomaton:
    """A byte automaton that counts ``step`` calls. It offers no table: the count is all there is to read.

    In the grading sandbox it stays in the tests' process: graded code gets a stand-in whose ``step`` and
    ``is_accepting`` are served (and counted) here (mini_vllm/sandbox/served.py).
    """

    sandbox_interface = "counting-automaton"

    def __init__(self, automaton: ByteAutomaton) -> None:
        self._automaton = automaton
        self.start = automaton.start
        self.num_states = automaton.num_states
        self.steps = 0

    def step(self, state: int, byte: int) -> int:
        self.steps += 1
        return self._automaton.step(state, byte)

    def is_accepting(self, state: int) -> bool:
        return self._automaton.is_accepting(state)


def trie_steps(automaton: ByteAutomaton, vocab: Vocabulary, state: int) -> int:
    """The steps a pruned trie walk takes from ``state``: one per child of every prefix that can be read.

    Counted on distinct prefixes of the vocabulary (the trie's nodes), without building a trie.
    """
    prefixes = {b""}
    for data in vocab.tokens:
        if data is not None:
            prefixes.update(data[:k] for k in range(1, len(data) + 1))
    readable = {p for p in prefixes if walk(automaton, state, p) != DEAD}
    return sum(1 for p in prefixes if p and p[:-1] in readable)


class OutlinesOracle:
    """outlines-core's index for a regular expression: its own automaton, its own per-state token sets."""

    def __init__(self, regex: str, vocab: Vocabulary) -> None:
        self.index = _outlines_index(regex, vocab)
        self.state = self.index.get_initial_state()

    def mask(self) -> list[int]:
        return sorted(self.index.get_allowed_tokens(self.state) or [])

    def mask_at(self, grammar: LibraryGrammar, state: int) -> list[int]:
        """outlines-core's mask at a state of ``library_grammar(regex)`` (the same regex: the same DFA)."""
        return sorted(self.index.get_allowed_tokens(grammar.library_state[state]) or [])

    def consume(self, token_id: int) -> None:
        self.state = self.index.get_next_state(self.state, token_id)


# (regex, the vocabulary's content) -> (CPU seconds the build took, the index). An index holds no walk (each oracle
# keeps its own state), so the next oracle of the same pair shares it: the tests make the same ones again and again
# (each grading of the course's own checks builds its vocabularies anew, so the key is the content, not the object).
_OUTLINES_INDEXES: dict[tuple[str, int | None, tuple[bytes | None, ...]], tuple[float, Any]] = {}
_INDEXES_KEPT = 8  # a Tekken index holds about 60 MB; when full, the cheapest to build again goes first


def _outlines_index(regex: str, vocab: Vocabulary) -> Any:
    """outlines-core's index of ``regex`` over ``vocab``, built once for each pair the cache still holds."""
    import outlines_core

    key = (regex, vocab.eos_token_id, tuple(vocab.tokens))
    if key not in _OUTLINES_INDEXES:
        started = time.process_time()
        by_bytes: dict[bytes, list[int]] = {}
        for token_id, data in enumerate(vocab.tokens):
            if data is not None:
                by_bytes.setdefault(data, []).append(token_id)
        index = outlines_core.Index(rust_regex(regex), outlines_core.Vocabulary(vocab.eos_token_id, by_bytes))
        if len(_OUTLINES_INDEXES) >= _INDEXES_KEPT:
            del _OUTLINES_INDEXES[min(_OUTLINES_INDEXES, key=lambda k: _OUTLINES_INDEXES[k][0])]
        _OUTLINES_INDEXES[key] = (time.process_time() - started, index)
    return _OUTLINES_INDEXES[key][1]


def allowed_ids(bits: bytes, size: int) -> list[int]:
    """The ids set in llguidance's bitmask (bit ``i & 7`` of byte ``i >> 3``), below ``size``."""
    import numpy as np

    bit_per_id = np.unpackbits(np.frombuffer(bits, dtype=np.uint8), bitorder="little")[:size]
    ids: list[int] = np.flatnonzero(bit_per_id).tolist()
    return ids


class _GuidanceTokenizer:
    """What llguidance asks of a tokenizer; special tokens are spelled with a leading 0xFF byte, its convention."""

    def __init__(self, vocab: Vocabulary) -> None:
        self.eos_token_id = vocab.eos_token_id
        self.bos_token_id = None
        self.tokens = [data if data is not None else b"\xff<special %d>" % i for i, data in enumerate(vocab.tokens)]
        self.special_token_ids = [i for i, data in enumerate(vocab.tokens) if data is None]

    def __call__(self, text: bytes) -> list[int]:  # only needed for forced bytes, which the grammar turns off
        raise NotImplementedError("the oracle never asks llguidance to tokenize")


_GUIDANCE_TOKENIZERS: dict[int, tuple[Vocabulary, Any]] = {}  # id -> (the vocabulary, kept alive; its tokenizer)


def _guidance_tokenizer(vocab: Vocabulary) -> Any:
    """llguidance's tokenizer for ``vocab``, made once per vocabulary (Tekken's takes a second)."""
    import llguidance

    def make(vocab: Vocabulary) -> Any:
        return llguidance.LLTokenizer(llguidance.TokenizerWrapper(_GuidanceTokenizer(vocab)), n_vocab=len(vocab))

    return kept_per_vocabulary(_GUIDANCE_TOKENIZERS, vocab, make)


class GuidanceOracle:
    """llguidance's matcher for a regular expression, with forcing off so every tokenization is allowed.

    By default llguidance allows only the canonical tokenization of bytes the grammar forces
    (after ``{"c`` only ``ity``, not ``i`` or ``it``); ``no_forcing`` asks for the plain mask.
    """

    def __init__(self, regex: str, vocab: Vocabulary) -> None:
        import llguidance

        tokenizer = _guidance_tokenizer(vocab)
        grammar = '%llguidance {"no_forcing": true}\nstart: /' + llguidance.regex_to_lark(regex) + "/"
        self.matcher = llguidance.LLMatcher(tokenizer, grammar, log_level=0)
        if self.matcher.is_error():
            raise ValueError(f"llguidance refused the grammar: {self.matcher.get_error()}")
        self.size = len(vocab)

    def mask(self) -> list[int]:
        return allowed_ids(self.matcher.compute_bitmask(), self.size)

    def consume(self, token_id: int) -> None:
        if not self.matcher.consume_token(token_id):
            raise ValueError(f"llguidance refused token {token_id}: {self.matcher.get_error()}")


# ----------------------------------------------------------------------------- task 5's recorded cases

WEATHER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"city": {"type": "string", "maxLength": 8}, "temperature": {"type": "integer"},
                   "unit": {"enum": ["celsius", "fahrenheit"]}, "note": {"type": "string"}},
    "required": ["city", "temperature", "unit", "note"], "additionalProperties": False,
}
CALL_PARAMETERS: dict[str, Any] = {
    "type": "object", "additionalProperties": False, "required": ["city", "unit", "note"],
    "properties": {"city": {"type": "string", "maxLength": 8}, "unit": {"enum": ["celsius", "fahrenheit"]},
                   "note": {"type": "string"}}}
SAMPLE_LIMIT = 400  # tokens: every case ends with EOS well before


@dataclass(frozen=True)
class SamplerCase:
    """A masked reply of the toy model: its scores, the grammar, and how the reply starts."""

    family: str
    message: str
    thinking: bool
    forced_call: bool = False  # the grammar is a forced get_weather call, and <tool_call> may end the thought

    @property
    def regex(self) -> str:
        if self.forced_call:
            return tool_call_constraint([("get_weather", CALL_PARAMETERS)], "tools").regex
        return schema_to_regex(WEATHER_SCHEMA)

    @property
    def implicit_end(self) -> bytes | None:
        return TOOL_CALL_START if self.forced_call else None


SAMPLER_CASES: dict[str, SamplerCase] = {
    **{f"json {family}": SamplerCase(family, "the weather in Tokyo as json, please", False)
       for family in ("byte", "bpe", "spm")},
    "thought then json": SamplerCase("bpe", "think json: the weather in Tokyo", True),
    "thought then forced call": SamplerCase("bpe", "think then call", True, forced_call=True),
}


def sampler_run(case: SamplerCase, make_sampler: Callable[..., Any], limit: int = SAMPLE_LIMIT,
                expected: Sequence[Sequence[Any]] | None = None) -> list[tuple[int, str]]:
    """(token, phase after it) per step of ``case``'s reply, chosen by ``make_sampler(automaton, vocab, allowed_at,
    thinking=..., implicit_end=...)`` over the toy model's scores, on outlines-core's automaton and masks.

    With ``expected``, the run stops at the first step that differs from it (the rest would follow a
    different reply)."""
    regex, vocab = case.regex, family_vocabulary(case.family)
    grammar = library_grammar(regex)
    masks = OutlinesOracle(regex, vocab)
    model = ToyModel(load_tokenizer(case.family))
    sampler = make_sampler(grammar.automaton, vocab, lambda state: masks.mask_at(grammar, state),
                           thinking=case.thinking, implicit_end=case.implicit_end)
    ids: list[int] = []
    run: list[tuple[int, str]] = []
    while len(run) < limit and (not run or run[-1][1] != "done"):
        token = sampler.choose(list(model.scores(case.message, ids, opened_thought=case.thinking)))
        ids.append(token)
        run.append((token, sampler.phase))
        if expected is not None and (len(run) > len(expected) or list(run[-1]) != list(expected[len(run) - 1])):
            break
    return run
