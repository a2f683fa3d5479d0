"""Wrong on purpose: decodes the whole history on every token (pitfall: right answer, O(N) per token)."""

from collections.abc import Sequence

from mini_vllm.tokenizer_base import REPLACEMENT_CHAR, Tokenizer

MUST_FAIL = ["test_cost_per_token_is_bounded"]
MAY_COST = [2]


class IncrementalDetokenizer:
    def __init__(self, tokenizer: Tokenizer, prompt_ids: Sequence[int] = (), window: int = 4,
                 skip_special_tokens: bool = False) -> None:
        self.tokenizer = tokenizer
        self.skip_special_tokens = skip_special_tokens
        self.tokens = list(prompt_ids)
        self.shown = len(self._decode())

    def _decode(self) -> str:
        return self.tokenizer.decode(self.tokens, skip_special_tokens=self.skip_special_tokens)

    def push(self, token_id: int) -> str:
        self.tokens.append(token_id)
        text = self._decode()
        if text.endswith(REPLACEMENT_CHAR):
            return ""
        new_text, self.shown = text[self.shown :], len(text)
        return new_text

    def flush(self) -> str:
        text = self._decode()
        new_text, self.shown = text[self.shown :], len(text)
        return new_text
