"""Paste the server's mask engine into lab-08's starter, to grade what it would earn there (issue 41).

``.venv/bin/python -m instructor.paste_mask_engine`` writes ``pasted.py`` into lab-08's folder: the blank starter with
``TokenMasker.scan`` / ``mask`` and ``TokenIndex`` glued to ``mini_vllm/server/mask_engine.py`` in the fewest
lines (the automaton's ``table`` when it has one, else every row read through ``step``). Then
``make lab-08 LAB_IMPL=pasted`` grades it, and ``rm`` the file. Measured on 2026-12-06: 38.5 / 100 (task 2 26 / 30,
failing only the two counted pruning tests; task 4 12.5 / 15), which is why the release leaves the engine out
(``instructor/release.py``, ``LEFT_OUT_FILES``).
"""

from __future__ import annotations

from mini_vllm.labs import lab_dir

GLUE = '''

# ---- pasted: the server's mask engine with the least glue (a probe of "no answer ships"; not a solution)
from array import array as _array

from mini_vllm.labtypes.lab08 import IndexStats as _IndexStats
from mini_vllm.server.mask_engine import TableMasks as _TableMasks
from mini_vllm.server.mask_engine import trie_levels as _trie_levels


def _engine(automaton, vocab, trie):
    table = getattr(automaton, "table", None)
    if table is None:  # a table-less automaton: read every row through step
        table = [[automaton.step(s, b) for b in range(256)] for s in range(automaton.num_states)]
    rows = [_array("i", row).tobytes() for row in table]
    accepting = [bool(automaton.is_accepting(s)) for s in range(automaton.num_states)]
    engine = _TableMasks(rows, accepting, _trie_levels(trie, len(vocab.tokens)), vocab.eos_token_id)
    return engine, len(table) * 256


def _mask(self, state):
    return _engine(self.automaton, self.vocab, self.trie)[0].ids(state).tolist()


def _index_init(self, automaton, vocab, trie):
    engine, steps = _engine(automaton, vocab, trie)
    distinct = {}
    masks = (engine.ids(s).tolist() for s in range(automaton.num_states))
    self._masks = [distinct.setdefault(tuple(m), m) for m in masks]
    stepped = steps if getattr(automaton, "table", None) is None else 0
    self.stats = _IndexStats(states=automaton.num_states, entries=sum(len(m) for m in distinct.values()),
                             steps=stepped)


TokenMasker.mask = _mask
TokenMasker.scan = _mask
TokenIndex.__init__ = _index_init
TokenIndex.allowed = lambda self, state: self._masks[state]
'''


def main() -> None:
    folder = lab_dir("lab-08")
    target = folder / "pasted.py"
    target.write_text((folder / "starter.py").read_text(encoding="utf-8") + GLUE, encoding="utf-8")
    print(f"wrote {target}: grade it with `make lab-08 LAB_IMPL=pasted`, then remove it")


if __name__ == "__main__":
    main()
