"""Wrong on purpose: decodes the whole history on every token (pitfall: right answer, O(N) per token).

It is the reference with one change: the context never moves forward. It starts at token 0
and stays there, so each push decodes everything from the first prompt token on.
"""

from collections.abc import Sequence

from mini_vllm.labs import load_lab
from mini_vllm.tokenizers.base import Tokenizer

_solution = load_lab("lab-04", "solution")

MUST_FAIL = ["test_cost_per_token_is_bounded"]
MAY_COST = [2]


class IncrementalDetokenizer(_solution.IncrementalDetokenizer):
    def __init__(self, tokenizer: Tokenizer, prompt_ids: Sequence[int] = (), window: int = 4,
                 skip_special_tokens: bool = False) -> None:
        super().__init__(tokenizer, prompt_ids, window, skip_special_tokens)
        # The mistake: the context is the whole history (token 0 is always a boundary).
        self._set_prefix(0, self._decode(self.tokens[: self._read]))

    def _move_prefix(self) -> None:
        pass  # ... and it never moves
