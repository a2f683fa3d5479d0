"""Lab 08 starter: constrained decoding over byte tokens.

Fill in the five tasks below (see README.md, "Your task"). Run the tests with:

    make lab-08
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

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
    position. Skip the surrogates; never spell an overlong form (README, "Background").
    """
    raise NotImplementedError("lab-08 task 1: implement utf8_sequences — see README, 'Your task'")


def lift_to_bytes(chars: CharAutomaton) -> ByteAutomaton:
    """The same language over bytes: every character transition becomes UTF-8 byte paths.

    Keep the character states' numbers (so the start and the accepting states stay put) and
    add a state for each unfinished prefix of a character; ``DEAD`` where no byte may go.
    """
    raise NotImplementedError("lab-08 task 1: implement lift_to_bytes — see README, 'Your task'")


# --------------------------------------------------------------------- task 2: the token mask


class TokenMasker:
    """The tokens allowed at an automaton state: those whose whole byte string it can read.

    Read the automaton through ``step`` and ``is_accepting`` only (the tests count the steps).
    """

    def __init__(self, automaton: ByteAutomaton, vocab: Vocabulary, trie: TokenTrie) -> None:
        self.automaton = automaton
        self.vocab = vocab
        self.trie = trie  # the vocabulary's byte trie, given (flat, in preorder): `mask` walks it (README, task 2)

    def scan(self, state: int) -> list[int]:
        """The plain way: walk every token's bytes from ``state``. Sorted ids, EOS when accepting."""
        raise NotImplementedError("lab-08 task 2: implement TokenMasker.scan — see README, 'Your task'")

    def mask(self, state: int) -> list[int]:
        """The same set, walking a trie of the vocabulary and skipping everything below a dead prefix."""
        raise NotImplementedError("lab-08 task 2: implement TokenMasker.mask — see README, 'Your task'")


# --------------------------------------------------------------------- task 3: advance


class GrammarCursor:
    """Where the output stands in the automaton, token after token."""

    def __init__(self, automaton: ByteAutomaton, vocab: Vocabulary) -> None:
        self.automaton = automaton
        self.vocab = vocab
        self.state = automaton.start
        self.pending = b""  # the unfinished character at the end of the output (its bytes so far)
        self.finished = False  # EOS was accepted: nothing may follow

    def advance(self, token_id: int) -> None:
        """Consume one sampled token, or raise TokenRejected (naming it) and change nothing."""
        raise NotImplementedError("lab-08 task 3: implement GrammarCursor.advance — see README, 'Your task'")


# --------------------------------------------------------------------- task 4: the index


class TokenIndex:
    """Every state's mask, computed once: a step of decoding is then a lookup.

    Set ``self.stats`` to an ``IndexStats`` (states indexed, ids stored, automaton steps taken).
    """

    def __init__(self, automaton: ByteAutomaton, vocab: Vocabulary, trie: TokenTrie) -> None:
        raise NotImplementedError("lab-08 task 4: implement TokenIndex.__init__ — see README, 'Your task'")

    def allowed(self, state: int) -> list[int]:
        raise NotImplementedError("lab-08 task 4: implement TokenIndex.allowed — see README, 'Your task'")


# --------------------------------------------------------------------- task 5: the sampler


class StructuredSampler:
    """Greedy choice over the model's scores: free while the model thinks, masked after.

    ``allowed_at(state)`` gives the mask at an automaton state (an index's lookup).
    ``phase`` goes ``thinking`` (only when the reply starts inside a thought) ->
    ``constrained`` -> ``done`` (after EOS). The thought ends at ``</think>``; with
    ``implicit_end`` (``<tool_call>`` for a forced call) it also ends where that tag begins,
    and the tag is the first thing the grammar reads.
    """

    def __init__(self, automaton: ByteAutomaton, vocab: Vocabulary, allowed_at: Callable[[int], Sequence[int]],
                 *, thinking: bool = False, implicit_end: bytes | None = None) -> None:
        self.automaton = automaton
        self.vocab = vocab
        self.allowed_at = allowed_at
        self.implicit_end = implicit_end
        self.phase = THINKING if thinking else CONSTRAINED
        self.state = automaton.start

    def choose(self, scores: Sequence[float]) -> int:
        """The best-scored token the current phase allows (ties: the lowest id); the sampler moves past it."""
        raise NotImplementedError("lab-08 task 5: implement StructuredSampler.choose — see README, 'Your task'")
