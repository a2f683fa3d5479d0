"""Wrong on purpose: decodes each token alone (pitfall: broken characters on CJK and emoji)."""

from collections.abc import Sequence

from mini_vllm.tokenizer_base import Tokenizer

MUST_FAIL = ["test_no_replacement_chars_for_valid_text", "test_split_emoji_emitted_at_the_token_that_completes_it"]
MAY_COST = [1, 2]


class IncrementalDetokenizer:
    def __init__(self, tokenizer: Tokenizer, prompt_ids: Sequence[int] = (), window: int = 4,
                 skip_special_tokens: bool = False) -> None:
        self.tokenizer = tokenizer
        self.skip_special_tokens = skip_special_tokens

    def push(self, token_id: int) -> str:
        return self.tokenizer.decode([token_id], skip_special_tokens=self.skip_special_tokens)

    def flush(self) -> str:
        return ""
