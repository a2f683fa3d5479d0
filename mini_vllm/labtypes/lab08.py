"""lab-08's value types: the automata, the vocabulary, the refusal error and the index's counts.

Everything here is plain data in bulk (lists of ints and bytes), so a whole vocabulary or
automaton crosses into the lab's code once, not one callback per token.
"""

from __future__ import annotations

from dataclasses import dataclass, field

DEAD = -1  # a ByteAutomaton table entry: no string of the language continues with this byte
THINKING, CONSTRAINED, DONE = "thinking", "constrained", "done"  # StructuredSampler.phase, in order
THINK_END = b"</think>"  # the tag that ends a thought (lab-06's rule); the grammar starts after it
# lab-06's implicit end: a call that begins without </think> ends the thought, and the tag is the call's start.
TOOL_CALL_START = b"<tool_call>"


@dataclass(frozen=True)
class CharAutomaton:
    """A deterministic automaton over Unicode code points (given: built from a regular expression).

    ``transitions[s]`` lists ``(lo, hi, target)``: from state ``s`` every code point in
    ``lo..hi`` (inclusive) leads to ``target``. The ranges of one state are sorted and do not
    overlap. A range may run across the UTF-16 surrogates (U+D800..U+DFFF), which are not
    characters and have no UTF-8 form. Every state can still reach an accepting one.
    """

    start: int
    accepting: tuple[int, ...]
    transitions: tuple[tuple[tuple[int, int, int], ...], ...]

    @property
    def num_states(self) -> int:
        return len(self.transitions)


@dataclass
class ByteAutomaton:
    """A deterministic automaton over bytes: ``table[s][b]`` is the next state, or ``DEAD``.

    ``accepting[s]`` says whether the bytes read so far are a whole string of the language.
    Read it through :meth:`step` and :meth:`is_accepting`: the tests may hand your code an
    automaton that counts those calls (the cost of a mask), and it has no ``table`` to read.
    """

    start: int
    accepting: list[bool]
    table: list[list[int]] = field(repr=False)

    @property
    def num_states(self) -> int:
        return len(self.table)

    def step(self, state: int, byte: int) -> int:
        return self.table[state][byte]

    def is_accepting(self, state: int) -> bool:
        return self.accepting[state]


@dataclass(frozen=True)
class Vocabulary:
    """A tokenizer's vocabulary as data: ``tokens[i]`` is the bytes token ``i`` stands for.

    ``None`` marks a special token (chat markers, padding): never allowed by a grammar. The
    EOS token is special too, and allowed exactly where the grammar accepts.
    """

    tokens: list[bytes | None] = field(repr=False)
    eos_token_id: int

    def __len__(self) -> int:
        return len(self.tokens)


class TokenRejected(ValueError):
    """The token cannot continue the output from this state (it is outside the mask)."""

    def __init__(self, token_id: int, state: int, reason: str) -> None:
        super().__init__(f"token {token_id} is not allowed in state {state}: {reason}")
        self.token_id = token_id
        self.state = state
        self.reason = reason


@dataclass(frozen=True)
class IndexStats:
    """What building a TokenIndex cost and holds."""

    states: int  # automaton states indexed
    entries: int  # token ids stored, over all states (the index's size)
    steps: int  # automaton steps taken while building (calls to ``step``)
