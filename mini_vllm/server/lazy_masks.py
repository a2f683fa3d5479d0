"""lab-08's masks computed as a reply goes, each state's at its first visit, kept in one cache bounded in bytes.

An index of every state's mask (lab-08's ``TokenIndex``) walks the whole vocabulary once per
automaton state before the first token: on Tekken (131,072 tokens) a schema of three strings of
100-120 characters is 14,741 byte states, and took a minute to compile. A reply visits a few hundred
of those states. So the server computes a state's mask the first time a reply stands there (llguidance
computes its masks lazily too), with the server's mask engine (``mask_engine``: a numpy pass over the
vocabulary's trie level by level, about 3 ms a state on Tekken where lab-08's Python walk of the same
trie takes up to 0.15 s). Each mask is kept as a numpy array of ids, the form the sampler's argmax
reads, so a later visit (this reply's or another's) is a lookup and hands the sampler the same array
without a copy.

The masks of every grammar share :class:`MaskCache`, bounded in bytes (least recently used first
out): an array of Tekken's inside-a-string mask is about a MiB.
"""

from __future__ import annotations

import importlib.util
import threading
from array import array
from collections import OrderedDict
from typing import Any

import numpy as np

from mini_vllm.labtypes.lab08 import ByteAutomaton, TokenTrie, Vocabulary

MASK_BYTES = 192 * 1024**2  # every grammar's masks together, as numpy arrays


def engine_present() -> bool:
    """Whether this copy has the server's mask engine. The student's release leaves it out (``instructor/release.py``):
    pasted into lab-08's starter it answered task 2 and most of task 4, so there the server asks the student's own
    ``TokenMasker`` (and lab-09's ``SplitMasker``), the path this course teaches, at Python's speed."""
    return importlib.util.find_spec("mini_vllm.server.mask_engine") is not None


def rebuild_automaton(data: tuple[Any, ...]) -> ByteAutomaton:
    """A byte automaton from the compile's plain data: its start, which states accept, each state's 256 next states."""
    start, accepting, rows = data[:3]
    table = []
    for raw in rows:
        row = array("i")
        row.frombytes(raw)
        table.append(row)
    return ByteAutomaton(start=start, accepting=accepting, table=table)  # type: ignore[arg-type]


class MaskCache:
    """(grammar, state) -> the state's mask as an int64 array; least recently used out past ``bound`` bytes."""

    def __init__(self, bound: int = MASK_BYTES) -> None:
        self.bound = bound
        self.nbytes = 0
        self.computed = 0  # masks computed (a test counts the work with it)
        self._masks: OrderedDict[tuple[str, int], np.ndarray] = OrderedDict()

    def get(self, key: tuple[str, int]) -> np.ndarray | None:
        found = self._masks.get(key)
        if found is not None:
            self._masks.move_to_end(key)
        return found

    def put(self, key: tuple[str, int], mask: np.ndarray) -> None:
        self.computed += 1
        if mask.nbytes > self.bound:
            return  # served, not kept
        self._masks[key] = mask
        self.nbytes += mask.nbytes
        while self.nbytes > self.bound:
            _, old = self._masks.popitem(last=False)
            self.nbytes -= old.nbytes

    def clear(self) -> None:
        self._masks.clear()
        self.nbytes = 0

    def drop(self, grammar: str) -> None:
        """Forget one grammar's masks (its masker was evicted)."""
        for key in [k for k in self._masks if k[0] == grammar]:
            self.nbytes -= self._masks.pop(key).nbytes


class LazyMasks:
    """One grammar's masks: the server's engine (or lab-08's ``TokenMasker``) asked at a state's first visit, then
    the shared cache."""

    def __init__(self, key: str, data: tuple[Any, ...], automaton: ByteAutomaton, lab08: Any, vocab: Vocabulary,
                 trie: TokenTrie, cache: MaskCache, lock: threading.Lock) -> None:
        self.key = key
        self.engine: Any = None
        self.masker: Any = None
        if engine_present():
            from mini_vllm.server.mask_engine import TableMasks, trie_levels

            _, accepting, rows = data[:3]
            self.engine = TableMasks(rows, accepting, trie_levels(trie, len(vocab)), vocab.eos_token_id)
        else:
            self.masker = lab08.TokenMasker(automaton, vocab, trie)
        self.cache = cache
        self.lock = lock  # the cache is shared by every reply's thread

    def allowed_at(self, state: int) -> np.ndarray:
        with self.lock:
            found = self.cache.get((self.key, state))
        if found is None:  # computed outside the lock: another reply's lookups go on meanwhile
            found = (self.engine.ids(state) if self.engine is not None
                     else np.asarray(self.masker.mask(state), dtype=np.int64))
            found.flags.writeable = False  # shared by every reply that visits the state
            with self.lock:
                self.cache.put((self.key, state), found)
        return found
