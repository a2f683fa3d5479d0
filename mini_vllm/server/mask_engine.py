"""The server's mask engine: one automaton state's mask over the whole vocabulary in milliseconds, with numpy.

lab-08's ``TokenMasker`` walks the trie node by node in Python: on Tekken (131,072 tokens, 266,313 trie
nodes) about 0.15 s a state on a quiet machine, and a reply through long bounded strings meets a new
state at nearly every token. Here the same question is asked of every node of one trie level at once:
the vocabulary's trie is renumbered once per process in depth order (:class:`TrieLevels`), so the nodes
of depth ``d`` are one slice and their parents lie in the slice before; a state's pass is then, level
after level, ``state[nodes] = table[state[parents], bytes]``, with a dead row that stays dead. A token is
allowed where the state at the node its bytes end on is alive; EOS where the state accepts. The result
is a boolean array over the vocabulary, kept as the sorted ids the sampler gathers its scores at (a numpy
array, never a Python list per token).

This is the server's, not a lab's: it reads a whole transition table as an array, so it cannot run on the
automata lab-08's cost tests hand over (they have no table, and count every ``step``; see the lab's
README, "In the server"). The server checks it against lab-08's ``TokenMasker`` and outlines-core in
``tests/test_server_mask_engine.py``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from mini_vllm.labtypes.lab08 import TokenTrie


@dataclass(frozen=True)
class TrieLevels:
    """A vocabulary's trie in depth order (made once per trie): node ``i``'s parent, its byte, each level's slice."""

    parent: np.ndarray  # int64: the parent of each node, in the new numbering (node 0, the root, is its own)
    byte: np.ndarray  # int64
    levels: tuple[tuple[int, int], ...]  # (first, end) of the nodes of depth 1, 2, ...
    token_node: np.ndarray  # int64 per token id: the node its bytes end on (0 for a special token)
    ordinary: np.ndarray  # bool per token id: not a special token
    renumbered: np.ndarray  # int64: preorder node -> its number here
    size: int


_LEVELS: dict[int, tuple[TokenTrie, TrieLevels]] = {}


def trie_levels(trie: TokenTrie, vocab_size: int) -> TrieLevels:
    """``trie`` in depth order, made on first use and kept (the trie too, so its id is never reused meanwhile)."""
    found = _LEVELS.get(id(trie))
    if found is not None and found[0] is trie:
        return found[1]
    depth = np.asarray(trie.depth, dtype=np.int64)
    order = np.argsort(depth, kind="stable")  # preorder within a level: children stay in byte order
    renumbered = np.empty(len(order), dtype=np.int64)
    renumbered[order] = np.arange(len(order), dtype=np.int64)
    parent = renumbered[np.asarray(trie.parent, dtype=np.int64)[order]]
    byte = np.asarray(trie.byte, dtype=np.int64)[order]
    bounds = np.searchsorted(depth[order], np.arange(1, trie.height + 2))
    levels = tuple((int(bounds[d]), int(bounds[d + 1])) for d in range(trie.height))
    token_node = np.zeros(vocab_size, dtype=np.int64)
    ordinary = np.zeros(vocab_size, dtype=bool)
    ends = [node for node, tokens in enumerate(trie.ending) for _ in tokens]
    ids = [token for tokens in trie.ending for token in tokens]
    token_node[ids] = renumbered[ends]
    ordinary[ids] = True
    made = TrieLevels(parent, byte, levels, token_node, ordinary, renumbered, len(order))
    _LEVELS[id(trie)] = (trie, made)
    while len(_LEVELS) > 8:
        del _LEVELS[next(iter(_LEVELS))]
    return made


class TablePasses:
    """One byte automaton as a flat array, and the state every trie node reaches from a given state."""

    def __init__(self, rows: Sequence[bytes], accepting: Sequence[bool], levels: TrieLevels) -> None:
        states = len(rows)
        table = np.frombuffer(b"".join(rows), dtype=np.int32).reshape(states, 256)
        table = np.where(table < 0, np.int32(states), table)  # DEAD becomes the extra row, which leads only to itself
        self.dead = states
        # int32 (4 bytes a transition: Tekken's three strings of 100-120 characters are 15 MB); a state times 256
        # plus a byte stays below 2**31 for any automaton under the compile's memory limit.
        self.flat = np.concatenate([table, np.full((1, 256), states, dtype=np.int32)]).ravel()
        self.accepting = np.concatenate([np.asarray(accepting, dtype=bool), [False]])
        self.levels = levels

    def reached(self, state: int) -> np.ndarray:
        """The state after each node's bytes, read from ``state`` (``self.dead`` where they cannot be read)."""
        levels, flat, dead = self.levels, self.flat, self.dead
        out = np.full(levels.size, dead, dtype=np.int32)
        out[0] = state
        parent, byte = levels.parent, levels.byte
        for first, end in levels.levels:
            above = out[parent[first:end]]
            if not (above != dead).any():
                break  # a whole level unreadable: everything deeper is too (out is already dead there)
            out[first:end] = flat[above * 256 + byte[first:end]]
        return out


class TableMasks:
    """lab-08's question (which tokens can a state read to their end?) for every state of one automaton."""

    def __init__(self, rows: Sequence[bytes], accepting: Sequence[bool], levels: TrieLevels, eos: int) -> None:
        self.passes = TablePasses(rows, accepting, levels)
        self.levels = levels
        self.eos = eos
        self.computed = 0  # masks computed (the tests count the work)

    def allowed(self, state: int) -> np.ndarray:
        """The mask at ``state`` as a boolean array over the vocabulary."""
        self.computed += 1
        reached = self.passes.reached(state)
        allowed: np.ndarray = (reached[self.levels.token_node] != self.passes.dead) & self.levels.ordinary
        allowed[self.eos] = bool(self.passes.accepting[state])
        return allowed

    def ids(self, state: int) -> np.ndarray:
        """The mask at ``state`` as sorted token ids (int64), the form lab-08's sampler gathers scores at."""
        ids: np.ndarray = np.flatnonzero(self.allowed(state))
        return ids
