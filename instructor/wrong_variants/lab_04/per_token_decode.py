"""Wrong on purpose: decodes each token alone (pitfall: broken characters on CJK and emoji).

The reference's input checks are kept (its ``__init__``); ``push`` decodes the new token with
no context and holds nothing, so ``flush`` has nothing left to give.
"""

from mini_vllm.labs import load_lab

_solution = load_lab("lab-04", "solution")

MUST_FAIL = ["test_no_replacement_chars_for_valid_text", "test_split_emoji_emitted_at_the_token_that_completes_it"]
MAY_COST = [1, 2]


class IncrementalDetokenizer(_solution.IncrementalDetokenizer):
    def push(self, token_id: int) -> str:
        return self._decode([token_id])  # the mistake: no context, no hold-back

    def flush(self) -> str:
        return ""  # nothing was ever held
