"""Wrong on purpose: a run of one-token U+FFFD is never released (pitfall: quadratic again on model-written U+FFFD).

It is the reference without its third proof ("every seam from three tokens back adds up").
A token whose text is a whole U+FFFD never proves a boundary with the other two: the text
after it starts with U+FFFD, and it has as many characters as tokens. So the pending run
grows, and every push re-decodes all of it: a model that writes 4,000 of them costs about
2,000 ids of decoding per token.
"""

from mini_vllm.labs import load_lab
from mini_vllm.tokenizers.base import REPLACEMENT_CHAR

_solution = load_lab("lab-04", "solution")

MUST_FAIL = ["test_cost_per_token_is_bounded"]
MAY_COST = [2]


class IncrementalDetokenizer(_solution.IncrementalDetokenizer):
    def _is_boundary(self, position: int, end: int, text: str, rights: dict[int, str]) -> bool:
        right = self._right(position, end, rights)
        if not right:
            return False
        if not right.startswith(REPLACEMENT_CHAR):
            return True
        # The mistake: adding up must come with fewer characters than tokens, always.
        return self._text_to(position) + right == text and len(right) < end - position
