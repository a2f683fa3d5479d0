"""lab-08's value types: the automata, the vocabulary, the refusal error and the index's counts.

Everything here is plain data in bulk (lists of ints and bytes), so a whole vocabulary or
automaton crosses into the lab's code once, not one callback per token.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

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


@dataclass(frozen=True)
class TokenTrie:
    """Every ordinary token's bytes as one trie, laid out flat in preorder (given: built once per vocabulary).

    This is the layout of llguidance's ``toktrie``. Node 0 is the empty prefix; node ``i`` stands for
    a prefix of ``depth[i]`` bytes whose last byte is ``byte[i]``. The nodes below ``i`` are exactly
    ``i + 1 .. skip[i] - 1``: going down is ``i + 1``, leaving a prefix and everything below it is
    one jump to ``skip[i]``, and the children of ``i`` are ``i + 1``, then each child's ``skip``, while
    it stays below ``skip[i]`` (in byte order). ``ending[i]`` lists the tokens whose bytes are exactly
    that prefix. A vocabulary's trie is built once per process (:func:`token_trie`) and shared by every
    grammar: for Tekken it is 266,313 nodes and about a second of Python.
    """

    byte: list[int] = field(repr=False)
    depth: list[int] = field(repr=False)
    skip: list[int] = field(repr=False)
    ending: list[tuple[int, ...]] = field(repr=False)
    parent: list[int] = field(repr=False)  # the node one byte up (node 0's is itself)
    first: list[int] = field(repr=False)  # how many tokens end at nodes before this one, in preorder
    in_order: list[int] = field(repr=False)  # every token, in preorder of the node it ends at
    height: int  # the longest token, in bytes

    def __len__(self) -> int:
        return len(self.byte)

    def children(self, node: int) -> list[int]:
        """The nodes one byte below ``node``, in byte order."""
        out, child, end = [], node + 1, self.skip[node]
        while child < end:
            out.append(child)
            child = self.skip[child]
        return out

    def tokens_below(self, node: int) -> list[int]:
        """Every token at ``node`` or under it: the tokens of ``node .. skip[node] - 1``, side by side."""
        end = self.skip[node]
        return self.in_order[self.first[node]:self.first[end] if end < len(self.first) else len(self.in_order)]

    def path(self, node: int, above: int = 0) -> bytes:
        """The bytes from node ``above`` down to ``node``, which lies under it."""
        out = []
        while node != above:
            out.append(self.byte[node])
            node = self.parent[node]
        return bytes(reversed(out))


def build_token_trie(tokens: list[bytes | None]) -> TokenTrie:
    """The trie of every ordinary token: sorted byte strings list the prefixes in preorder, children in byte order."""
    by_bytes: dict[bytes, list[int]] = {}
    for token_id, data in enumerate(tokens):
        if data is not None:
            by_bytes.setdefault(data, []).append(token_id)
    byte, depth, parent, ending = [0], [0], [0], [tuple(by_bytes.pop(b"", ()))]
    path = [0]  # path[d]: the node of the current prefix's first d bytes
    previous = b""
    for data in sorted(by_bytes):
        shared = 0
        for x, y in zip(previous, data, strict=False):
            if x != y:
                break
            shared += 1
        del path[shared + 1:]
        for position in range(shared, len(data)):  # the nodes the previous path lacks
            parent.append(path[position])
            path.append(len(byte))
            byte.append(data[position])
            depth.append(position + 1)
            ending.append(())
        ending[-1] = tuple(by_bytes[data])
        previous = data
    skip = [len(byte)] * len(byte)
    open_nodes: list[int] = []  # the path to the current node: each closes when a node no deeper arrives
    for node, level in enumerate(depth):
        while open_nodes and depth[open_nodes[-1]] >= level:
            skip[open_nodes.pop()] = node
        open_nodes.append(node)
    first: list[int] = []
    in_order: list[int] = []
    for tokens_here in ending:
        first.append(len(in_order))
        in_order.extend(tokens_here)
    return TokenTrie(byte, depth, skip, ending, parent, first, in_order, max(depth))


_TRIES: dict[int, tuple[Vocabulary, TokenTrie]] = {}
_KEPT = 8  # vocabularies whose tries a process keeps (a server has one tokenizer; the tests a handful)
Made = TypeVar("Made")


def kept_per_vocabulary(cache: dict[int, tuple[Vocabulary, Made]], vocab: Vocabulary,
                        make: Callable[[Vocabulary], Made], kept: int = _KEPT) -> Made:
    """``make(vocab)``, made on first use and kept in ``cache``: at most ``kept`` vocabularies, the most recently
    used longest (a family's outlives a test's own). The vocabulary is kept too, so its id is never reused."""
    found = cache.pop(id(vocab), None)
    if found is None or found[0] is not vocab:
        found = (vocab, make(vocab))
    cache[id(vocab)] = found
    while len(cache) > kept:
        del cache[next(iter(cache))]
    return found[1]


def token_trie(vocab: Vocabulary) -> TokenTrie:
    """``vocab``'s trie, built on first use and kept: every grammar over the same vocabulary shares it."""
    return kept_per_vocabulary(_TRIES, vocab, lambda v: build_token_trie(v.tokens))
