"""Wrong on purpose: the lesson's original fix, a full-history decode on every split character.

It is the reference with one change: whenever the decoded text ends in U+FFFD (a character
still arriving, or a real U+FFFD), the context is widened to the whole history before the
boundary search. The output is still right, but a CJK or emoji-heavy reply costs O(N) per token.
"""

from mini_vllm.labs import load_lab
from mini_vllm.tokenizers.base import REPLACEMENT_CHAR

_solution = load_lab("lab-04", "solution")

MUST_FAIL = ["test_cost_per_token_is_bounded"]
MAY_COST = [2]


class IncrementalDetokenizer(_solution.IncrementalDetokenizer):
    def push(self, token_id: int) -> str:
        if not self._prompt_unfinished and self._decode([*self.tokens[self._prefix :], token_id]).endswith(
                REPLACEMENT_CHAR):
            # The mistake: fall back on the whole history (token 0 is always a boundary).
            self._set_prefix(0, self._decode(self.tokens[: self._read]))
            self._starts = [0, *self._starts]
        return super().push(token_id)
