"""Wrong on purpose: the trie is built again in every ``mask()`` (README task 3: build it once in ``__init__``).

The masks are right; each one reads the whole vocabulary again, which the tests count.
"""

from mini_vllm.labs import load_lab

_solution = load_lab("lab-09", "solution")
globals().update({name: getattr(_solution, name) for name in _solution.__all__})

MUST_FAIL = ["test_the_trie_is_built_once_in_init"]
MAY_COST = [3]


class TrieMasker(_solution.TrieMasker):
    def mask(self, matcher):  # type: ignore[no-untyped-def]
        self._trie = _solution._Trie(self.vocab.tokens)  # the mistake: a new trie for every mask
        return super().mask(matcher)
