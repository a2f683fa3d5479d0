"""The original window-diff detokenizer of the lesson, kept as a baseline.

Lab-04 improves on it; the benchmark, the notebook and the wrong variants measure
against it. It decodes the last ``window`` tokens and diffs against the same window
minus the new token. When that shorter window shows U+FFFD (a character was still
arriving, or a real U+FFFD), the diff is unreliable, and the original fix re-decodes
the *whole* history and diffs against a global count of emitted characters. Correct,
but that fallback runs on every split character, so its cost grows with the stream.
"""

from __future__ import annotations

from collections.abc import Sequence

from mini_vllm.tokenizer_base import REPLACEMENT_CHAR, Tokenizer


class OriginalWindowDiff:
    """``push``/``flush`` like lab-04's detokenizer; ``full_fallback=False`` is the buggy first draft."""

    def __init__(self, tokenizer: Tokenizer, prompt_ids: Sequence[int] = (), window: int = 4,
                 skip_special_tokens: bool = False, full_fallback: bool = True) -> None:
        self.tokenizer = tokenizer
        self.window = window
        self.skip_special_tokens = skip_special_tokens
        self.full_fallback = full_fallback
        self.tokens = list(prompt_ids)
        self.emitted_len = len(self._decode(self.tokens))  # characters of decode(all) already shown

    def _decode(self, ids: Sequence[int]) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=self.skip_special_tokens)

    def push(self, token_id: int) -> str:
        self.tokens.append(token_id)
        start = max(0, len(self.tokens) - self.window)
        window_text = self._decode(self.tokens[start:])
        if window_text.endswith(REPLACEMENT_CHAR):
            return ""  # a character is still arriving (or the model wrote U+FFFD): wait
        prefix_text = self._decode(self.tokens[start:-1])
        if REPLACEMENT_CHAR in prefix_text and self.full_fallback:
            new_text = self._decode(self.tokens)[self.emitted_len :]  # O(history): the cost problem
        else:
            new_text = window_text[len(prefix_text) :]  # without the fallback: overshoots after a split character
        self.emitted_len += len(new_text)
        return new_text

    def flush(self) -> str:
        text = self._decode(self.tokens)[self.emitted_len :]
        self.emitted_len += len(text)
        return text
