"""The server's masks for a grammar with a stack: what the lexer alone decides, by the mask engine, then the parser.

lab-09's ``SplitMasker`` splits the vocabulary per lexer state by a Python walk of the trie (a tenth of a
second to a second per state on Tekken) and returns a Python list of up to 127,785 ids per token. Here
the split is the mask engine's level passes (``mask_engine``), one per live lexeme, kept per (lexer
state, trie node) as a numpy array of the ids the lexer alone allows and the edges where a lexeme ends
(a node where one is complete, and a child byte no live lexeme reads). Only those edges ask lab-09's
matcher (its ``feed``, over lab-09's parser): edges whose lexeme ends with the same complete lexemes
before the same byte get the same answer from the same parser, so each such group is fed once, and
below an edge the next lexeme's split under that node is looked up the same way. The mask is a numpy
array of ids, kept per reply for as long as the parser has not moved (inside a string, every token).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from mini_vllm.labtypes.lab08 import TokenTrie, Vocabulary
from mini_vllm.server.mask_engine import TablePasses, TrieLevels

# The splits one grammar keeps, (lexer state, trie node) each, least recently used out past this many bytes: a split
# at the root is a bit per token (16 KiB on Tekken), one under a node the ids below it that the lexer allows.
ENTRY_BYTES = 16 * 1024**2
LexerState = tuple[tuple[int, int], ...]
# Where lexemes end below a node: (the bytes down to a node inside the lexeme, the edge byte, the children there).
Edges = list[tuple[bytes, int, list[int]]]


@dataclass(frozen=True)
class Entry:
    allowed: np.ndarray  # at the root (node 0) a bit per token (np.packbits), else the ids under the node (int64)
    edges: Edges

    @property
    def nbytes(self) -> int:
        return int(self.allowed.nbytes) + 64 * sum(len(children) + 1 for _, _, children in self.edges)


class SplitEngine:
    """One grammar's splits over one vocabulary, made at first use and kept (bounded)."""

    def __init__(self, lexemes: Sequence[tuple[Any, ...]], vocab: Vocabulary, trie: TokenTrie,
                 levels: TrieLevels) -> None:
        self.passes = [TablePasses(rows, accepting, levels) for _, _, _, accepting, rows in lexemes]
        self.vocab, self.trie, self.levels = vocab, trie, levels
        self.order = np.empty(levels.size, dtype=np.int64)  # depth numbering -> preorder
        self.order[levels.renumbered] = np.arange(levels.size, dtype=np.int64)
        self._entries: OrderedDict[tuple[LexerState, int], Entry] = OrderedDict()
        self._lock = threading.Lock()
        self.nbytes = 0
        self.computed = 0  # splits computed (the tests count the work)

    def entry(self, lexer_state: LexerState, root: int) -> Entry:
        key = (lexer_state, root)
        with self._lock:  # every reply's thread shares the splits
            found = self._entries.get(key)
            if found is not None:
                self._entries.move_to_end(key)
                return found
        found = self._compute(lexer_state, root)  # outside the lock: the other replies' lookups go on
        with self._lock:
            if key not in self._entries:
                self._entries[key] = found
                self.computed += 1
                self.nbytes += found.nbytes
            while self.nbytes > ENTRY_BYTES and len(self._entries) > 1:
                self.nbytes -= self._entries.popitem(last=False)[1].nbytes
        return found

    def _runs(self, root: int) -> list[tuple[int, int]]:
        """The nodes strictly below preorder node ``root``, level by level, as slices of the depth numbering."""
        levels = self.levels
        if root == 0:
            return list(levels.levels)
        low, high = root + 1, self.trie.skip[root]
        runs = []
        for first, end in levels.levels[self.trie.depth[root]:]:
            level = self.order[first:end]  # preorder numbers, ascending: a subtree's nodes are one run of them
            lo, hi = first + int(np.searchsorted(level, low)), first + int(np.searchsorted(level, high))
            if lo == hi:
                break
            runs.append((lo, hi))
        return runs

    def _compute(self, lexer_state: LexerState, root: int) -> Entry:
        levels, size = self.levels, self.levels.size
        runs = self._runs(root)
        alive = np.zeros(size, dtype=bool)
        complete = np.zeros(size, dtype=np.int64)  # bit i: the i-th live lexeme accepts the bytes to this node
        top = int(levels.renumbered[root])
        for bit, (lexeme, state) in enumerate(lexer_state):
            passes = self.passes[lexeme]
            out = np.full(size, passes.dead, dtype=np.int32)
            out[top] = state
            for first, end in runs:
                above = out[levels.parent[first:end]]
                out[first:end] = passes.flat[above * 256 + levels.byte[first:end]]
            alive |= out != passes.dead
            complete |= passes.accepting[out].astype(np.int64) << bit
        alive[top] = True
        edges: dict[tuple[int, int], tuple[int, list[int]]] = {}
        for first, end in runs:
            parent = levels.parent[first:end]
            ends = np.flatnonzero(~alive[first:end] & alive[parent] & (complete[parent] != 0)) + first
            for node in ends.tolist():  # few: the children past a node where a lexeme is complete
                above = int(levels.parent[node])
                group = edges.setdefault((int(complete[above]), int(levels.byte[node])),
                                         (int(self.order[above]), []))
                group[1].append(int(self.order[node]))
        trie = self.trie
        listed = [(trie.path(above, root), byte, children) for (_, byte), (above, children) in edges.items()]
        if root == 0:
            allowed = alive[levels.token_node] & levels.ordinary
            allowed[levels.token_node == 0] = False  # a token of no bytes is read by no walk
            return Entry(np.packbits(allowed), listed)
        below = np.asarray(trie.tokens_below(root)[len(trie.ending[root]):], dtype=np.int64)
        return Entry(below[alive[levels.token_node[below]]], listed)

    def mask(self, matcher: Any) -> np.ndarray:
        """The mask at the matcher's state, as sorted ids: the lexer's own, and past each edge the parser took."""
        entry = self.entry(tuple(map(tuple, matcher.lexer_state)), 0)
        allowed = np.unpackbits(entry.allowed, count=len(self.vocab)).view(bool)
        extra: list[Any] = []
        self._past(matcher, entry.edges, extra)
        for ids in extra:
            allowed[ids] = True
        allowed[self.vocab.eos_token_id] = bool(matcher.can_end())
        return np.flatnonzero(allowed)

    def _past(self, matcher: Any, edges: Edges, extra: list[Any]) -> None:
        """Add what the parser allows past ``edges``; leave the matcher as it was."""
        ending, skip = self.trie.ending, self.trie.skip
        mark = matcher.checkpoint()
        for inside, byte, children in edges:
            if all(matcher.feed(b) for b in inside) and matcher.feed(byte):  # one child stands for its group
                after = tuple(map(tuple, matcher.lexer_state))
                for child in children:
                    extra.append(list(ending[child]))
                    if skip[child] > child + 1:
                        below = self.entry(after, child)
                        extra.append(below.allowed)
                        self._past(matcher, below.edges, extra)
            matcher.rollback(mark)
