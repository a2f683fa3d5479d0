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

from mini_vllm.tokenizers.base import REPLACEMENT_CHAR, Tokenizer


class OriginalWindowDiff:
    """``push``/``flush`` like lab-04's detokenizer; ``full_fallback=False`` is the buggy first draft."""

    def __init__(self, tokenizer: Tokenizer, prompt_ids: Sequence[int] = (), window: int = 4,
                 skip_special_tokens: bool = False, full_fallback: bool = True) -> None:
        self.tokenizer = tokenizer
        self.window = window
        self.skip_special_tokens = skip_special_tokens
        self.full_fallback = full_fallback
        self.tokens = list(prompt_ids)
        self.chars_shown = len(self._text(self.tokens))  # a global cursor into decode(all tokens)

    def _text(self, ids: Sequence[int]) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=self.skip_special_tokens)

    def _advance(self, piece: str) -> str:
        self.chars_shown += len(piece)
        return piece

    def push(self, token_id: int) -> str:
        self.tokens.append(token_id)
        recent = self.tokens[-self.window :]
        with_new, without_new = self._text(recent), self._text(recent[:-1])
        if with_new.endswith(REPLACEMENT_CHAR):
            return ""  # a character is still arriving (or the model wrote U+FFFD): wait
        if REPLACEMENT_CHAR in without_new and self.full_fallback:
            return self._advance(self._text(self.tokens)[self.chars_shown :])  # O(history): the cost problem
        # Without the fallback this slice starts too late after a split character.
        return self._advance(with_new[len(without_new) :])

    def flush(self) -> str:
        return self._advance(self._text(self.tokens)[self.chars_shown :])
