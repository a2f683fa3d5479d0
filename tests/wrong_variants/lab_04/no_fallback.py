"""Wrong on purpose: the window-diff without any fallback (pitfall: split characters never show)."""

from collections.abc import Sequence

from mini_vllm.testing.baselines import OriginalWindowDiff
from mini_vllm.tokenizer_base import Tokenizer

MUST_FAIL = ["test_split_emoji_emitted_at_the_token_that_completes_it", "test_split_characters_in_a_row"]
MAY_COST = [2]


class IncrementalDetokenizer(OriginalWindowDiff):
    def __init__(self, tokenizer: Tokenizer, prompt_ids: Sequence[int] = (), window: int = 4,
                 skip_special_tokens: bool = False) -> None:
        super().__init__(tokenizer, prompt_ids, window, skip_special_tokens, full_fallback=False)
