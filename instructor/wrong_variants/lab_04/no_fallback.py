"""Wrong on purpose: the window-diff without any fallback (pitfall: split characters never show).

The first draft of the lesson (``OriginalWindowDiff(full_fallback=False)``): decode the last
``window`` tokens and diff against the same window minus the new token. After a split
character the shorter window shows U+FFFD and the diff starts too late. The reference's
input checks are kept, and the window always leaves one token of context (that rule is task 1's).
"""

from collections.abc import Sequence

from instructor.baselines import OriginalWindowDiff
from mini_vllm.labs import load_lab
from mini_vllm.tokenizers.base import Tokenizer

_solution = load_lab("lab-04", "solution")

MUST_FAIL = ["test_split_emoji_emitted_at_the_token_that_completes_it", "test_split_characters_in_a_row"]
MAY_COST = [2, 4]  # its prompt is the formula's (chars shown = len(decode(prompt))): wrong mid-character too


class IncrementalDetokenizer(OriginalWindowDiff):
    def __init__(self, tokenizer: Tokenizer, prompt_ids: Sequence[int] = (), window: int = 4,
                 skip_special_tokens: bool = False) -> None:
        _solution.IncrementalDetokenizer(tokenizer, prompt_ids, window, skip_special_tokens)  # its input checks
        super().__init__(tokenizer, prompt_ids, max(2, window), skip_special_tokens, full_fallback=False)

    def push(self, token_id: int) -> str:
        self._text([token_id])  # a bad id raises here, before any state changes
        return super().push(token_id)
