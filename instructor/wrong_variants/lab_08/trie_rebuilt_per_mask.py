"""Wrong on purpose: the trie is built again in every ``mask()`` (README task 2: build it once, in ``__init__``).

The masks are right and the automaton steps the same; each mask reads the whole vocabulary again, which the
tests count.
"""

from mini_vllm.labs import load_lab

_solution = load_lab("lab-08", "solution")
globals().update({name: getattr(_solution, name) for name in _solution.__all__})

MUST_FAIL = ["test_the_trie_is_built_once_in_init"]
MAY_COST = [2]


class TokenMasker(_solution.TokenMasker):
    def mask(self, state: int) -> list[int]:
        self._trie = _solution._build_trie(self.vocab.tokens)  # the mistake: a new trie for every mask
        return super().mask(state)
