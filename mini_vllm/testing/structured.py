"""lab-08's oracles and trusted helpers: what the tests, the notebook and the bench compare against.

- :func:`oracle_bytes` lifts a character automaton to bytes another way than the lab
  asks: a state inside a character is named by *which code points are still possible*
  (an interval, since UTF-8 keeps code-point order) and where each leads, so states are
  built on demand and merged when those sets agree. Nothing is split into byte ranges.
- :class:`OutlinesOracle` and :class:`GuidanceOracle` compute masks with outlines-core's
  index and llguidance's matcher, configured to the same regular expression.
- :class:`CountingAutomaton` is a byte automaton that counts the steps asked of it, so a
  mask's cost is counted on the tests' side, where code under test cannot touch the count.
"""

from __future__ import annotations

import functools
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

from mini_vllm.families import load_tokenizer
from mini_vllm.grammar import vocabulary_of
from mini_vllm.labtypes.lab08 import DEAD, ByteAutomaton, CharAutomaton, Vocabulary

# Code points written with 2, 3, 4 bytes (RFC 3629), and the surrogates UTF-8 never writes.
_BY_LENGTH = {2: (0x80, 0x7FF), 3: (0x800, 0xFFFF), 4: (0x10000, 0x10FFFF)}
_SURROGATES = (0xD800, 0xDFFF)


@functools.cache
def family_vocabulary(family: str) -> Vocabulary:
    """A tokenizer family's vocabulary as data (cached: Tekken's takes two seconds)."""
    return vocabulary_of(load_tokenizer(family))


def _lead_interval(lead: int) -> tuple[int, int, int] | None:
    """(first code point, last code point, bytes still to come) for a lead byte of 2-4 bytes, else None."""
    length = 2 if 0xC0 <= lead < 0xE0 else 3 if 0xE0 <= lead < 0xF0 else 4 if 0xF0 <= lead < 0xF8 else 0
    if not length:
        return None
    payload = lead & (0x7F >> length)
    lo, hi = payload << 6 * (length - 1), ((payload + 1) << 6 * (length - 1)) - 1
    lo, hi = max(lo, _BY_LENGTH[length][0]), min(hi, _BY_LENGTH[length][1])  # no overlongs, nothing past U+10FFFF
    if _SURROGATES[0] <= hi and lo <= _SURROGATES[1]:  # only ED's block meets them, from below
        hi = _SURROGATES[0] - 1
    return (lo, hi, length - 1) if lo <= hi else None


def _clip(moves: Sequence[tuple[int, int, int]], lo: int, hi: int) -> tuple[tuple[int, int, int], ...]:
    """The moves for code points lo..hi, as offsets from lo."""
    return tuple((max(a, lo) - lo, min(b, hi) - lo, t) for a, b, t in moves if a <= hi and b >= lo)


def oracle_bytes(chars: CharAutomaton) -> ByteAutomaton:
    """The byte automaton of ``chars``, built by asking, byte by byte, which code points are still possible."""
    table: list[list[int]] = []
    accepting: list[bool] = []
    accepted = set(chars.accepting)
    inside: dict[tuple[int, tuple[tuple[int, int, int], ...]], int] = {}  # (bytes to come, moves) -> state
    todo: deque[tuple[int, tuple[tuple[int, int, int], ...]]] = deque()

    def state_inside(key: tuple[int, tuple[tuple[int, int, int], ...]]) -> int:
        if not key[1]:
            return DEAD
        if key not in inside:
            inside[key] = len(table)
            table.append([DEAD] * 256)
            accepting.append(False)
            todo.append(key)
        return inside[key]

    for state in range(chars.num_states):  # character states keep their numbers
        table.append([DEAD] * 256)
        accepting.append(state in accepted)
    for state, moves in enumerate(chars.transitions):
        for byte in range(256):
            if byte < 0x80:
                table[state][byte] = next((t for a, b, t in moves if a <= byte <= b), DEAD)
            elif (lead := _lead_interval(byte)) is not None:
                lo, hi, to_come = lead
                offset = lo & ((1 << 6 * to_come) - 1)  # where lo sits in the block the lead byte opens
                clipped = _clip(moves, lo, hi)
                table[state][byte] = state_inside((to_come, tuple((a + offset, b + offset, t) for a, b, t in clipped)))
    while todo:
        key = todo.popleft()
        to_come, moves = key
        here = inside[key]
        size = 1 << 6 * (to_come - 1)  # code points per value of the next continuation byte
        for byte in range(0x80, 0xC0):
            lo = (byte - 0x80) * size
            clipped = _clip(moves, lo, lo + size - 1)
            if to_come == 1:
                table[here][byte] = clipped[0][2] if clipped else DEAD
            else:
                table[here][byte] = state_inside((to_come - 1, clipped))
    return ByteAutomaton(start=chars.start, accepting=accepting, table=table)


@dataclass(frozen=True)
class Difference:
    """The shortest byte string on which two automata disagree, and how."""

    path: bytes
    theirs: str  # what the automaton under test does with the last byte (or at the end)
    oracle: str


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
                reads = ("reads it", "refuses it")
                return Difference(path_to(pair) + bytes([byte]), reads[x == DEAD], reads[y == DEAD])
            if x != DEAD and (x, y) not in parent:
                parent[(x, y)] = (pair, byte)
                queue.append((x, y))
    return None


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


def oracle_mask(automaton: ByteAutomaton, vocab: Vocabulary, state: int) -> list[int]:
    """The definition: every token whose bytes the automaton reads from ``state``; EOS when it accepts."""
    allowed = [i for i, data in enumerate(vocab.tokens) if data is not None and walk(automaton, state, data) != DEAD]
    return sorted([*allowed, vocab.eos_token_id] if automaton.is_accepting(state) else allowed)


class OutlinesOracle:
    """outlines-core's index for a regular expression: its own automaton, its own per-state token sets."""

    def __init__(self, regex: str, vocab: Vocabulary) -> None:
        import outlines_core

        by_bytes: dict[bytes, list[int]] = {}
        for token_id, data in enumerate(vocab.tokens):
            if data is not None:
                by_bytes.setdefault(data, []).append(token_id)
        self.index = outlines_core.Index(regex, outlines_core.Vocabulary(vocab.eos_token_id, by_bytes))
        self.state = self.index.get_initial_state()

    def mask(self) -> list[int]:
        return sorted(self.index.get_allowed_tokens(self.state) or [])

    def consume(self, token_id: int) -> None:
        self.state = self.index.get_next_state(self.state, token_id)


class _GuidanceTokenizer:
    """What llguidance asks of a tokenizer; special tokens are spelled with a leading 0xFF byte, its convention."""

    def __init__(self, vocab: Vocabulary) -> None:
        self.eos_token_id = vocab.eos_token_id
        self.bos_token_id = None
        self.tokens = [data if data is not None else b"\xff<special %d>" % i for i, data in enumerate(vocab.tokens)]
        self.special_token_ids = [i for i, data in enumerate(vocab.tokens) if data is None]

    def __call__(self, text: bytes) -> list[int]:  # only needed for forced bytes, which the grammar turns off
        raise NotImplementedError("the oracle never asks llguidance to tokenize")


class GuidanceOracle:
    """llguidance's matcher for a regular expression, with forcing off so every tokenization is allowed.

    By default llguidance allows only the canonical tokenization of bytes the grammar forces
    (after ``{"c`` only ``ity``, not ``i`` or ``it``); ``no_forcing`` asks for the plain mask.
    """

    def __init__(self, regex: str, vocab: Vocabulary) -> None:
        import llguidance

        tokenizer = llguidance.LLTokenizer(llguidance.TokenizerWrapper(_GuidanceTokenizer(vocab)), n_vocab=len(vocab))
        grammar = '%llguidance {"no_forcing": true}\nstart: /' + llguidance.regex_to_lark(regex) + "/"
        self.matcher = llguidance.LLMatcher(tokenizer, grammar, log_level=0)
        if self.matcher.is_error():
            raise ValueError(f"llguidance refused the grammar: {self.matcher.get_error()}")
        self.size = len(vocab)

    def mask(self) -> list[int]:
        bits = self.matcher.compute_bitmask()
        return [i for i in range(self.size) if bits[i >> 3] >> (i & 7) & 1]

    def consume(self, token_id: int) -> None:
        if not self.matcher.consume_token(token_id):
            raise ValueError(f"llguidance refused token {token_id}: {self.matcher.get_error()}")
