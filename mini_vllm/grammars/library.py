"""A regular expression as a byte automaton, compiled by a well-kept library (outlines-core).

lab-08's tasks run on the automata this gives, lab-09's lexemes are compiled through it, and the
server's structured outputs use it for every regular piece of a schema. It is given, not a task:
the library does the regex-to-DFA work, this module reads its DFA back over the 256 single bytes.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from mini_vllm.labtypes.lab08 import DEAD, ByteAutomaton

_BYTE_EOS = 256  # the EOS id of the single-byte vocabulary library_grammar compiles over


@dataclass(frozen=True)
class LibraryGrammar:
    """A regular expression as outlines-core's DFA over bytes: a ByteAutomaton, and each state's id in the library."""

    regex: str
    automaton: ByteAutomaton
    library_state: tuple[int, ...]  # library_state[s]: outlines-core's id of state s


def rust_regex(regex: str) -> str:
    """``regex`` as outlines-core's regex-automata reads it: every non-ASCII character written as ``\\x{...}``."""
    return "".join(c if ord(c) < 0x80 else f"\\x{{{ord(c):x}}}" for c in regex)


@functools.cache
def library_grammar(regex: str, ended: bool = False) -> LibraryGrammar:
    """outlines-core's index of ``regex`` over the 256 single bytes, read back as a byte automaton.

    Each token is one byte, so the index's transitions are the DFA's byte transitions (EOS, id 256,
    leaves the final states only). States are numbered in the library's order, the start first, and
    keep outlines-core's ids (:class:`OutlinesOracle` gives that index's mask at any of them).

    outlines-core's index leaves out some moves *from* a state that is already a whole string (after
    ``7`` in a bare number it refuses ``.``; after ``a`` in ``(é|a)*`` it refuses ``C3``). lab-08's
    tests use schemas whose whole strings end with ``}`` or ``"``, where nothing is left out. With
    ``ended`` (lab-09's lexemes, a number among them) the regex is compiled followed by NUL, so no state
    of the regex itself is final there, and a state accepts when NUL leads from it to the end (a regex
    that reads NUL itself is refused); its ids are then no state of the plain regex's index.
    """
    import outlines_core

    vocabulary = outlines_core.Vocabulary(_BYTE_EOS, {bytes([b]): [b] for b in range(256)})
    index = outlines_core.Index(f"(?:{rust_regex(regex)})\\x00" if ended else rust_regex(regex), vocabulary)
    moves = index.get_transitions()
    final = set(index.get_final_states())
    start = index.get_initial_state()
    if ended:
        if any(targets.get(0) is not None and targets[0] not in final for targets in moves.values()):
            raise ValueError(f"library_grammar: {regex!r} reads NUL itself, which marks the end here")
        accepting = {state for state, targets in moves.items() if targets.get(0) in final}
        kept = {state for state in moves if state not in final} | {start}
    else:
        accepting = final
        kept = set(moves) | final | {t for targets in moves.values() for t in targets.values()} | {start}
    ids = sorted(kept, key=lambda s: (s != start, s))
    number = {library: ours for ours, library in enumerate(ids)}
    table = [[DEAD] * 256 for _ in ids]
    for library, targets in moves.items():
        for token, target in targets.items():
            if library in number and target in number and token != _BYTE_EOS and not (ended and token == 0):
                table[number[library]][token] = number[target]
    return LibraryGrammar(regex, ByteAutomaton(start=0, accepting=[s in accepting for s in ids], table=table),
                          tuple(ids))
