"""Wrong on purpose: starts as if nothing had been shown (pitfall: emitted_len = 0 re-emits the prompt)."""

from collections.abc import Sequence

from mini_vllm.labs import load_lab
from mini_vllm.tokenizers.base import Tokenizer

_solution = load_lab("lab-04", "solution")

MUST_FAIL = ["test_prompt_is_never_re_emitted", "test_fifty_random_slicings"]
MAY_COST = [3, 4]  # every test with a prompt sees it: task 4's prompts too


class IncrementalDetokenizer(_solution.IncrementalDetokenizer):
    def __init__(self, tokenizer: Tokenizer, prompt_ids: Sequence[int] = (), window: int = 4,
                 skip_special_tokens: bool = False) -> None:
        super().__init__(tokenizer, prompt_ids, window, skip_special_tokens)
        # The mistake: the prompt counts as not yet shown (read and prefix back at token 0).
        self._read = self._start = 0
        self._set_prefix(0, "")
        self._starts, self._prompt_unfinished = [0], False
