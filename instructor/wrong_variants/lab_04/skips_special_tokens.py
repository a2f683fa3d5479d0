"""Wrong on purpose: always decodes with skip_special_tokens=True (pitfall: markers vanish mid-stream)."""

from collections.abc import Sequence

from mini_vllm.labs import load_lab
from mini_vllm.tokenizers.base import Tokenizer

_solution = load_lab("lab-04", "solution")

MUST_FAIL = ["test_special_tokens_follow_skip_special_tokens"]
MAY_COST = [1]


class IncrementalDetokenizer(_solution.IncrementalDetokenizer):
    def __init__(self, tokenizer: Tokenizer, prompt_ids: Sequence[int] = (), window: int = 4,
                 skip_special_tokens: bool = False) -> None:
        super().__init__(tokenizer, prompt_ids, window, skip_special_tokens=True)  # the mistake: asked or not
