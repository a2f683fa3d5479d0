"""Wrong on purpose: a mask that only allows tokens ending on a character boundary.

It looks safe ("never leave the output mid-character"), but a vocabulary that splits a
character over tokens can then never write it: Tekken spells 🫨 as four one-byte tokens,
and the first of them is refused (the shape of llama.cpp #2553).
"""

from mini_vllm.labs import load_lab

_solution = load_lab("lab-08", "solution")
globals().update({name: getattr(_solution, name) for name in _solution.__all__})

MUST_FAIL = ["test_tekken_byte_tokens_can_spell_an_emoji", "test_mask_equals_both_oracles_on_random_walks",
             "test_after_a_lead_byte_only_continuations_are_allowed"]
MAY_COST = [2, 4]


def _ends_mid_character(data: bytes) -> bool:
    return _solution._unfinished_tail(data) != b"" or (data[:1] >= b"\x80" and data[:1] < b"\xc0")


class TokenMasker(_solution.TokenMasker):
    def scan(self, state: int) -> list[int]:
        return [i for i in super().scan(state) if i == self.vocab.eos_token_id
                or not _ends_mid_character(self.vocab.tokens[i] or b"")]

    def mask(self, state: int) -> list[int]:
        return [i for i in super().mask(state) if i == self.vocab.eos_token_id
                or not _ends_mid_character(self.vocab.tokens[i] or b"")]


class TokenIndex(_solution.TokenIndex):
    def __init__(self, automaton, vocab, trie):  # type: ignore[no-untyped-def]
        super().__init__(automaton, vocab, trie)
        masker = TokenMasker(automaton, vocab, trie)
        self._masks = [masker.mask(s) for s in range(automaton.num_states)]
