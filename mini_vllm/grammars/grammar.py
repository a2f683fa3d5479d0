"""The given half of lab-08: JSON Schema -> regular expression -> automaton over characters.

Two well-kept libraries do the work; this module only checks the schema against the subset
the course supports and turns the libraries' answers into plain data
(:class:`~mini_vllm.labtypes.lab08.CharAutomaton`, :class:`~mini_vllm.labtypes.lab08.Vocabulary`):

- :mod:`mini_vllm.grammars.schema_regex` writes the regular expression (the server's own writer: it
  checks limits first and escapes property names; outlines-core's serves a looser subset);
- ``interegular`` compiles it to a deterministic automaton whose transitions are character
  classes, which become sorted code-point ranges here.

The student's lab starts from the character automaton: lifting it to bytes is the lesson.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from typing import Any

from mini_vllm.grammars import schema_regex
from mini_vllm.grammars.schema_regex import UnsupportedSchema
from mini_vllm.labtypes.lab08 import CharAutomaton, Vocabulary
from mini_vllm.tokenizers.base import Tokenizer

__all__ = ["UnsupportedSchema", "regex_to_chars", "schema_to_chars", "schema_to_regex", "vocabulary_of"]

MAX_CODE_POINT = 0x10FFFF


def schema_to_regex(schema: dict[str, Any]) -> str:
    """The regular expression whose strings are exactly the compact JSON texts ``schema`` allows.

    Written by :mod:`mini_vllm.grammars.schema_regex`, which checks the schema against the server's
    limits first (its ``UnsupportedSchema`` names the keyword). Objects list their properties
    in the schema's order (required or not), with at most one space around ``:`` and ``,``.
    """
    return schema_regex.schema_to_regex(schema)


def _ranges(code_points: Iterable[int]) -> list[tuple[int, int]]:
    """Sorted code points as inclusive ranges."""
    ranges: list[tuple[int, int]] = []
    for cp in sorted(code_points):
        if ranges and ranges[-1][1] == cp - 1:
            ranges[-1] = (ranges[-1][0], cp)
        else:
            ranges.append((cp, cp))
    return ranges


def _complement(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Every code point 0..U+10FFFF outside ``ranges`` (sorted, disjoint)."""
    out, next_free = [], 0
    for lo, hi in ranges:
        if lo > next_free:
            out.append((next_free, lo - 1))
        next_free = hi + 1
    if next_free <= MAX_CODE_POINT:
        out.append((next_free, MAX_CODE_POINT))
    return out


def regex_to_chars(regex: str) -> CharAutomaton:
    """Compile ``regex`` (the whole string must match) to a trimmed automaton over code points.

    interegular's automaton names its character classes by symbol; one symbol stands for
    "anything else" (every character the pattern never names). Here each symbol becomes
    code-point ranges, states that cannot reach an accepting state are dropped, and the
    rest are numbered in breadth-first order from the start (so the start is 0).
    """
    import interegular
    from interegular.fsm import anything_else

    fsm = interegular.parse_pattern(regex).to_fsm()
    named = [ord(c) for c in fsm.alphabet if c is not anything_else]
    others = _complement(_ranges(named))
    symbol_ranges: dict[Any, list[tuple[int, int]]] = {}
    for char, symbol in fsm.alphabet.items():
        if char is anything_else:
            symbol_ranges.setdefault(symbol, []).extend(others)
        else:
            symbol_ranges.setdefault(symbol, []).append((ord(char), ord(char)))

    # Keep the states that lie on some path from the start to an accepting state.
    reverse: dict[Any, set[Any]] = {}  # interegular's states are ints, typed as its own State
    for state, moves in fsm.map.items():
        for target in moves.values():
            reverse.setdefault(target, set()).add(state)
    alive: set[Any] = set(fsm.finals)
    todo: list[Any] = list(fsm.finals)
    while todo:
        for source in reverse.get(todo.pop(), ()):
            if source not in alive:
                alive.add(source)
                todo.append(source)
    if fsm.initial not in alive:
        raise ValueError(f"the regular expression matches nothing: {regex!r}")
    number = {fsm.initial: 0}
    order, queue = [fsm.initial], deque([fsm.initial])
    while queue:
        state = queue.popleft()
        for target in fsm.map.get(state, {}).values():
            if target in alive and target not in number:
                number[target] = len(order)
                order.append(target)
                queue.append(target)

    transitions = []
    for state in order:
        pieces = sorted((lo, hi, number[target]) for symbol, target in fsm.map.get(state, {}).items()
                        if target in alive for lo, hi in symbol_ranges.get(symbol, ()))
        merged: list[tuple[int, int, int]] = []
        for lo, hi, to in pieces:  # neighbouring ranges to the same state become one
            if merged and merged[-1][2] == to and merged[-1][1] == lo - 1:
                merged[-1] = (merged[-1][0], hi, to)
            else:
                merged.append((lo, hi, to))
        transitions.append(tuple(merged))
    accepting = tuple(sorted(number[s] for s in fsm.finals if s in number))
    return CharAutomaton(start=0, accepting=accepting, transitions=tuple(transitions))


def schema_to_chars(schema: dict[str, Any]) -> CharAutomaton:
    return regex_to_chars(schema_to_regex(schema))


def vocabulary_of(tokenizer: Tokenizer) -> Vocabulary:
    """The vocabulary as data: each ordinary token's bytes, ``None`` for special tokens (EOS included)."""
    special = set(tokenizer.all_special_ids) | {tokenizer.eos_token_id}
    tokens = [None if i in special else tokenizer.decode_single_token_bytes(i) for i in range(tokenizer.vocab_size)]
    empty = [i for i, t in enumerate(tokens) if t == b""]
    if empty:
        raise ValueError(f"tokens {empty[:5]} stand for no bytes: a grammar cannot tell when to allow them")
    return Vocabulary(tokens=tokens, eos_token_id=tokenizer.eos_token_id)
