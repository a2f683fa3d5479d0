"""Wrong on purpose: EOS is always in the mask.

The model may stop at any point, and a reply cut after `{"city": "東` reaches the client
as broken JSON.
"""

from mini_vllm.labs import load_lab

_solution = load_lab("lab-08", "solution")
globals().update({name: getattr(_solution, name) for name in _solution.__all__})

MUST_FAIL = ["test_eos_exactly_when_accepting", "test_mask_equals_both_oracles_on_random_walks",
             "test_index_equals_the_definition_at_every_state"]
MAY_COST = [2, 4]


class TokenMasker(_solution.TokenMasker):
    def _with_eos(self, state: int, allowed: list[int]) -> list[int]:
        return sorted({*allowed, self.vocab.eos_token_id})


class TokenIndex(_solution.TokenIndex):
    def __init__(self, automaton, vocab, trie):  # type: ignore[no-untyped-def]
        super().__init__(automaton, vocab, trie)
        masker = TokenMasker(automaton, vocab, trie)
        self._masks = [masker.mask(s) for s in range(automaton.num_states)]
