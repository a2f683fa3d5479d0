"""Wrong on purpose: the index keeps one list per state, even where states allow the same tokens.

Its masks are right and its stats report the distinct masks' size, but every state inside
a string holds its own copy of nearly the whole vocabulary: on Tekken, hundreds of
megabytes where one list would do. The tests count what the index holds, not what it says.
"""

from mini_vllm.labs import load_lab

_solution = load_lab("lab-08", "solution")
globals().update({name: getattr(_solution, name) for name in _solution.__all__})

MUST_FAIL = ["test_index_stores_each_distinct_mask_once"]
MAY_COST = [4]


class TokenIndex(_solution.TokenIndex):
    def __init__(self, automaton, vocab, trie):  # type: ignore[no-untyped-def]
        super().__init__(automaton, vocab, trie)
        self._masks = [list(mask) for mask in self._masks]  # a copy per state: nothing shared
