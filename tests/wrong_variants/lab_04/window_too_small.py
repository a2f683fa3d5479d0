"""Wrong on purpose: the window-diff with a 2-token window (pitfall: a 3-token character never fits).

The lesson's original window-diff with its full-history fallback, but the window is fixed
at 2 tokens whatever the caller asks. The reference's input checks are kept.
"""

from collections.abc import Sequence

from mini_vllm.labs import load_lab
from mini_vllm.testing.baselines import OriginalWindowDiff
from mini_vllm.tokenizer_base import Tokenizer

_solution = load_lab("lab-04", "solution")

MUST_FAIL = ["test_split_emoji_emitted_at_the_token_that_completes_it", "test_split_characters_in_a_row"]
MAY_COST = [2]


class IncrementalDetokenizer(OriginalWindowDiff):
    def __init__(self, tokenizer: Tokenizer, prompt_ids: Sequence[int] = (), window: int = 4,
                 skip_special_tokens: bool = False) -> None:
        _solution.IncrementalDetokenizer(tokenizer, prompt_ids, window, skip_special_tokens)  # its input checks
        super().__init__(tokenizer, prompt_ids, window=2, skip_special_tokens=skip_special_tokens)

    def push(self, token_id: int) -> str:
        self._text([token_id])  # a bad id raises here, before any state changes
        return super().push(token_id)
