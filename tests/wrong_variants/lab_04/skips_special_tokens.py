"""Wrong on purpose: always decodes with skip_special_tokens=True (pitfall: markers vanish mid-stream)."""

from collections.abc import Sequence

from mini_vllm.labs import load_lab

_solution = load_lab("lab-04", "solution")

MUST_FAIL = ["test_special_tokens_follow_skip_special_tokens"]
MAY_COST = [1]


class IncrementalDetokenizer(_solution.IncrementalDetokenizer):
    def _decode(self, ids: Sequence[int]) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=True)
