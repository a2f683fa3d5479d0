"""Lab 08 reference solution: constrained decoding over byte tokens.

A grammar arrives as an automaton over characters; tokens are byte strings that may end
inside a character. Lifting the automaton to bytes once (task 1) makes every later question
a walk over bytes: which tokens can be read from a state (task 2), what state a token leads
to (task 3), all masks at once (task 4), and which token to sample (task 5).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from mini_vllm.labtypes.lab08 import (
    CONSTRAINED,
    DEAD,
    DONE,
    THINK_END,
    THINKING,
    TOOL_CALL_START,
    ByteAutomaton,
    CharAutomaton,
    IndexStats,
    TokenRejected,
    TokenTrie,
    Vocabulary,
)

__all__ = [
    "CONSTRAINED", "DEAD", "DONE", "THINKING", "THINK_END", "TOOL_CALL_START", "ByteAutomaton", "CharAutomaton",
    "GrammarCursor",
    "IndexStats", "StructuredSampler", "TokenIndex", "TokenMasker", "TokenRejected", "TokenTrie", "Vocabulary",
    "lift_to_bytes",
    "utf8_sequences",
]

# RFC 3629: the code points written with 1, 2, 3 and 4 bytes.
LENGTH_RANGES = ((0x0, 0x7F), (0x80, 0x7FF), (0x800, 0xFFFF), (0x10000, 0x10FFFF))
SURROGATES = (0xD800, 0xDFFF)  # UTF-16's halves: not characters, no UTF-8 form

# --------------------------------------------------------------------- task 1: the byte automaton


def utf8_sequences(lo: int, hi: int) -> list[list[tuple[int, int]]]:
    """The code points ``lo..hi`` as UTF-8 byte-range sequences: ``[(first, last), ...]`` per byte.

    A code point matches a sequence when each of its bytes lies in the range at its
    position. Surrogates are skipped, and no sequence spells an overlong form, because
    each piece is cut to one encoded length before its bytes are read off.
    """
    sequences = []
    for low, high in _without_surrogates(lo, hi):
        for first, last in LENGTH_RANGES:
            if max(low, first) <= min(high, last):
                sequences += _same_length(max(low, first), min(high, last))
    return sequences


def _without_surrogates(lo: int, hi: int) -> list[tuple[int, int]]:
    if hi < SURROGATES[0] or lo > SURROGATES[1]:
        return [(lo, hi)]
    pieces = []
    if lo < SURROGATES[0]:
        pieces.append((lo, SURROGATES[0] - 1))
    if hi > SURROGATES[1]:
        pieces.append((SURROGATES[1] + 1, hi))
    return pieces


def _same_length(lo: int, hi: int) -> list[list[tuple[int, int]]]:
    """``lo..hi`` (both written with the same number of bytes) as byte-range sequences.

    Reading a range off byte by byte (first byte of lo .. first byte of hi, and so on) is
    only right when the range covers whole blocks: below the first byte where lo and hi
    differ, lo must start a block (all low bits 0) and hi must end one (all low bits 1).
    Otherwise split at the block boundary and try each half.
    """
    length = len(chr(lo).encode("utf-8"))
    for trailing in range(1, length):  # blocks of 1, 2, 3 trailing continuation bytes
        low_bits = (1 << (6 * trailing)) - 1
        if lo >> (6 * trailing) == hi >> (6 * trailing):
            continue  # same block at this size: nothing to split
        if lo & low_bits:  # lo is inside a block: its block's tail first, then the rest
            return _same_length(lo, lo | low_bits) + _same_length((lo | low_bits) + 1, hi)
        if hi & low_bits != low_bits:  # hi stops inside a block: the whole blocks first, then its head
            return _same_length(lo, (hi & ~low_bits) - 1) + _same_length(hi & ~low_bits, hi)
    return [list(zip(chr(lo).encode("utf-8"), chr(hi).encode("utf-8"), strict=True))]


def lift_to_bytes(chars: CharAutomaton) -> ByteAutomaton:
    """The same language over bytes: every character transition becomes UTF-8 byte paths.

    The character states keep their numbers. A character of n bytes gets n - 1 new states
    in between (its unfinished prefixes); prefixes that read the same byte ranges from the
    same state share them, so a class like "any character but a quote" costs a dozen
    states, not one per code point.
    """
    table = [[DEAD] * 256 for _ in range(chars.num_states)]
    accepting = [False] * chars.num_states
    for state in chars.accepting:
        accepting[state] = True
    for state, moves in enumerate(chars.transitions):
        for lo, hi, target in moves:
            for sequence in utf8_sequences(lo, hi):
                here = state
                for first, last in sequence[:-1]:
                    inside = table[here][first]
                    if inside == DEAD:  # a prefix not seen before: a new state for the unfinished character
                        inside = len(table)
                        table.append([DEAD] * 256)
                        accepting.append(False)
                        for byte in range(first, last + 1):
                            table[here][byte] = inside
                    here = inside
                first, last = sequence[-1]
                for byte in range(first, last + 1):  # the last byte completes the character
                    table[here][byte] = target
    return ByteAutomaton(start=chars.start, accepting=accepting, table=table)


# --------------------------------------------------------------------- task 2: the token mask


class TokenMasker:
    """The tokens allowed at an automaton state: those whose whole byte string it can read."""

    def __init__(self, automaton: ByteAutomaton, vocab: Vocabulary, trie: TokenTrie) -> None:
        self.automaton = automaton
        self.vocab = vocab
        self.trie = trie  # the vocabulary's, given: built once and shared by every grammar

    def scan(self, state: int) -> list[int]:
        """The plain way: walk every token's bytes from ``state``."""
        step = self.automaton.step
        allowed = []
        for token_id, data in enumerate(self.vocab.tokens):
            if data is None:
                continue
            here = state
            for byte in data:
                here = step(here, byte)
                if here == DEAD:
                    break
            else:
                allowed.append(token_id)  # a token may end inside a character: only DEAD refuses it
        return self._with_eos(state, allowed)

    def mask(self, state: int) -> list[int]:
        """The same set, walking the trie: a dead prefix rules out every token below it at once."""
        return self._pruned_walk(state)[0]

    def _pruned_walk(self, state: int) -> tuple[list[int], int]:
        """(the mask at ``state``, the automaton steps it took): one step per child of each readable prefix."""
        trie, step = self.trie, self.automaton.step
        byte, depth, skip, ending = trie.byte, trie.depth, trie.skip, trie.ending
        reached = [state] * (trie.height + 1)  # reached[d]: the state after the current prefix's first d bytes
        allowed = list(ending[0])
        node, end, steps = 1, len(byte), 0
        while node < end:
            level = depth[node]
            here = step(reached[level - 1], byte[node])
            steps += 1
            if here == DEAD:
                node = skip[node]  # pruned: nothing that starts with this prefix can be read
                continue
            reached[level] = here
            if ending[node]:
                allowed += ending[node]
            node += 1
        allowed.sort()
        return self._with_eos(state, allowed), steps

    def _with_eos(self, state: int, allowed: list[int]) -> list[int]:
        # EOS says "the output is complete": allowed exactly when the bytes so far are a whole string.
        if self.automaton.is_accepting(state):
            allowed.append(self.vocab.eos_token_id)
            allowed.sort()
        return allowed


# --------------------------------------------------------------------- task 3: advance


def _unfinished_tail(data: bytes) -> bytes:
    """The bytes after the last character boundary of valid UTF-8 ``data`` (at most 3)."""
    for back in range(1, min(4, len(data)) + 1):
        byte = data[-back]
        if byte & 0xC0 != 0x80:  # a lead byte (or ASCII): the last character starts here
            length = 1 if byte < 0x80 else 2 if byte < 0xE0 else 3 if byte < 0xF0 else 4
            return data[-back:] if back < length else b""
    return b""


class GrammarCursor:
    """Where the output stands in the automaton, token after token."""

    def __init__(self, automaton: ByteAutomaton, vocab: Vocabulary) -> None:
        self.automaton = automaton
        self.vocab = vocab
        self.state = automaton.start
        self.pending = b""  # the unfinished character at the end of the output (its bytes so far)
        self.finished = False  # EOS was accepted: nothing may follow

    def advance(self, token_id: int) -> None:
        """Consume one sampled token, or raise TokenRejected and change nothing."""
        if isinstance(token_id, bool) or not isinstance(token_id, int) or not 0 <= token_id < len(self.vocab):
            raise TokenRejected(token_id, self.state, "not a token id of this vocabulary")
        if self.finished:
            raise TokenRejected(token_id, self.state, "the output already ended with EOS")
        if token_id == self.vocab.eos_token_id:
            if not self.automaton.is_accepting(self.state):
                raise TokenRejected(token_id, self.state, "EOS before the output is a whole string of the grammar")
            self.finished = True
            return
        data = self.vocab.tokens[token_id]
        if data is None:
            raise TokenRejected(token_id, self.state, "a special token is never part of the output")
        here = self.state  # a local walk: self.state changes only once the whole token is read
        for position, byte in enumerate(data):
            here = self.automaton.step(here, byte)
            if here == DEAD:
                raise TokenRejected(token_id, self.state, f"its byte {position} ({byte:02x}) cannot follow")
        self.state = here
        self.pending = _unfinished_tail(self.pending + data)


# --------------------------------------------------------------------- task 4: the index


class TokenIndex:
    """Every state's mask, computed once: a step of decoding is then a lookup."""

    def __init__(self, automaton: ByteAutomaton, vocab: Vocabulary, trie: TokenTrie) -> None:
        masker = TokenMasker(automaton, vocab, trie)
        distinct: dict[tuple[int, ...], list[int]] = {}
        self._masks: list[list[int]] = []
        steps = 0
        for state in range(automaton.num_states):
            allowed, taken = masker._pruned_walk(state)
            steps += taken
            # Many states allow the same tokens (inside any string, say): keep one copy of each mask.
            self._masks.append(distinct.setdefault(tuple(allowed), allowed))
        self.stats = IndexStats(states=automaton.num_states, entries=sum(len(m) for m in distinct.values()),
                                steps=steps)

    def allowed(self, state: int) -> list[int]:
        return self._masks[state]


# --------------------------------------------------------------------- task 5: the sampler


class StructuredSampler:
    """Greedy choice over the model's scores: free while the model thinks, masked after.

    ``allowed_at(state)`` gives the mask at an automaton state (an index's lookup).
    The phase goes ``thinking`` (only when the reply starts inside a thought) ->
    ``constrained`` -> ``done`` (after EOS). The thought ends at ``</think>``, whose bytes
    are the thought's; with ``implicit_end`` (``<tool_call>`` for a forced call) it also
    ends where that tag begins, and the tag is the first thing the grammar reads.

    The choice itself is vectorized (numpy), as a real server applies its bitmask to the logits: an
    argmax over every score, and a gather of the allowed ids' scores only when that token is not
    allowed (``_best``). A Python loop over Tekken's 131,072 scores costs milliseconds a token.
    """

    def __init__(self, automaton: ByteAutomaton, vocab: Vocabulary, allowed_at: Callable[[int], Sequence[int]],
                 *, thinking: bool = False, implicit_end: bytes | None = None) -> None:
        self.automaton = automaton
        self.vocab = vocab
        self.allowed_at = allowed_at
        self.implicit_end = implicit_end
        self.phase = THINKING if thinking else CONSTRAINED
        self.state = automaton.start
        self._tail = b""  # the thought's last bytes: a tag may arrive split over tokens
        self._tail_size = max(len(THINK_END), len(implicit_end or b"")) - 1
        self._ordinary = _ordinary_ids(vocab)
        self._arrays: dict[int, np.ndarray] = {}  # each state's mask as an array, made on the state's first visit

    def choose(self, scores: Sequence[float]) -> int:
        """The best-scored token the current phase allows (ties: the lowest id); the sampler moves past it."""
        if self.phase == DONE:
            raise RuntimeError("the output already ended with EOS")
        values = np.asarray(scores, dtype=np.float64)
        if self.phase == THINKING:
            return self._think(values)
        allowed = self._arrays.get(self.state)
        if allowed is None:
            allowed = self._arrays[self.state] = np.asarray(self.allowed_at(self.state), dtype=np.int64)
        if not len(allowed):
            raise RuntimeError(f"no token is allowed in state {self.state}: the grammar cannot go on")
        best = _best(allowed, values)
        if best == self.vocab.eos_token_id:
            self.phase = DONE
        else:
            self.state = self._walk(self.state, self.vocab.tokens[best] or b"")
        return best

    def _think(self, scores: np.ndarray) -> int:
        """A thought is the model's own: no mask, except that its last token must hand the grammar a readable rest."""
        candidates = self._ordinary
        while True:
            best = _best(candidates, scores)
            data = self._tail + (self.vocab.tokens[best] or b"")
            output = self._output_after_thought(data)
            if output is None:  # still thinking
                self._tail = data[len(data) - self._tail_size:] if len(data) > self._tail_size else data
                return best
            after = self._walk(self.automaton.start, output)
            if after != DEAD:
                self.phase, self.state = CONSTRAINED, after
                return best
            candidates = candidates[candidates != best]  # it ends the thought with bytes the grammar refuses

    def _output_after_thought(self, data: bytes) -> bytes | None:
        """What ``data`` holds after the thought's end (the grammar's first bytes), or None if the thought goes on."""
        closed = data.find(THINK_END)
        opened = data.find(self.implicit_end) if self.implicit_end else -1
        if opened >= 0 and (closed < 0 or opened < closed):
            return data[opened:]  # the call's tag ends the thought and starts the output
        if closed >= 0:
            return data[closed + len(THINK_END):]
        return None

    def _walk(self, state: int, data: bytes) -> int:
        for byte in data:
            state = self.automaton.step(state, byte)
            if state == DEAD:
                break
        return state


_ORDINARY: dict[int, tuple[Vocabulary, np.ndarray]] = {}


def _ordinary_ids(vocab: Vocabulary) -> np.ndarray:
    """The ids of ``vocab``'s ordinary tokens, once per vocabulary: a server makes a sampler per reply, and on
    Tekken the list of 131,072 ids took tens of milliseconds each time."""
    found = _ORDINARY.get(id(vocab))
    if found is None or found[0] is not vocab:
        ids = np.array([i for i, data in enumerate(vocab.tokens) if data is not None], dtype=np.int64)
        ids.flags.writeable = False  # shared by every sampler over this vocabulary
        found = _ORDINARY[id(vocab)] = (vocab, ids)  # the vocabulary is kept too: its id is never reused meanwhile
        while len(_ORDINARY) > 8:
            del _ORDINARY[next(iter(_ORDINARY))]
    return found[1]


def _best(ids: np.ndarray, scores: np.ndarray) -> int:
    """The best-scored of ``ids`` (sorted): argmax returns the first maximum, so a tie goes to the lowest id.

    When most tokens are allowed (inside a string: ~127,800 of Tekken's 131,072), first the argmax of every
    score: when that token is allowed it is the answer (no allowed id scores more, and one scoring the same with
    a lower id would have been the first maximum), ~25 µs a token against ~200 µs for the gather of the allowed
    ids' scores and its argmax. The gather is needed only when it is not allowed, or when few ids are (it is
    cheap then)."""
    if 4 * len(ids) > len(scores):
        best = int(np.argmax(scores))
        if ids.take(np.searchsorted(ids, best), mode="clip") == best:  # clip: past the last id reads the last
            return best
    return int(ids[np.argmax(np.take(scores, ids))])
