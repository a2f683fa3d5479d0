"""Lab 04 reference solution: incremental detokenization with the tokenizer's own ``decode``.

Two offsets into the token list do all the bookkeeping (vLLM calls them prefix and
read offsets):

    tokens:  [ .... already shown .... | context | pending ... ]
                                       ^prefix   ^read

- everything before ``read`` has been shown (or is the prompt), and ``read`` sits where
  no character is cut in two;
- ``prefix .. read`` is a little context decoded again with every step, so the diff is
  taken against real neighbours (some tokenizers decode a token differently at the very
  start of a string);
- ``read ..`` is pending: tokens whose text is not yet certain.

Each push decodes ``context + pending`` and shows what goes past the context's text.
While that ends in U+FFFD a character may still be arriving, so the pending tokens wait;
but only a character's last few tokens can be unfinished, so the text before them is
released as soon as it is settled. That keeps every decode a few tokens long, whatever
the stream: CJK, emoji, or a model that writes real U+FFFD characters.
"""

from __future__ import annotations

from collections.abc import Sequence

from mini_vllm.tokenizer_base import REPLACEMENT_CHAR, Tokenizer

# An unfinished character is at most 3 bytes, so it spans at most the last 3 tokens.
_MAX_UNFINISHED_TOKENS = 3


class IncrementalDetokenizer:
    """Streams the text of generated tokens, using only ``tokenizer.decode``.

    The concatenation of every ``push`` and the final ``flush`` equals
    ``decode(prompt + output)[len(decode(prompt)):]``. A character split across tokens
    is shown with the token that completes it; the prompt is never shown.
    """

    def __init__(self, tokenizer: Tokenizer, prompt_ids: Sequence[int] = (), window: int = 4,
                 skip_special_tokens: bool = False) -> None:
        if isinstance(window, bool) or not isinstance(window, int) or window < 1:
            raise ValueError(f"window must be an int >= 1, got {window!r}")
        self.tokenizer = tokenizer
        self.window = window
        self.skip_special_tokens = skip_special_tokens
        self.tokens = list(prompt_ids)
        self._decode(self.tokens)  # once, to reject a bad prompt id here rather than mid-stream
        self._move_offsets(len(self.tokens))

    def _decode(self, ids: Sequence[int]) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=self.skip_special_tokens)

    def _move_offsets(self, read_offset: int) -> None:
        """Everything before ``read_offset`` is now shown; keep ``window - 1`` tokens as context."""
        self._read_offset = read_offset
        self._prefix_offset = max(0, read_offset - (self.window - 1))
        self._context_text = self._decode(self.tokens[self._prefix_offset : read_offset])

    def _show_through(self, read_offset: int, text: str) -> str:
        """``text`` is the decode of ``tokens[prefix:read_offset]``: show what lies past the context."""
        new_text = text[len(self._context_text) :]
        self._move_offsets(read_offset)
        return new_text

    def push(self, token_id: int) -> str:
        text = self._decode([*self.tokens[self._prefix_offset :], token_id])  # a bad id raises here, state intact
        self.tokens.append(token_id)
        if not text.endswith(REPLACEMENT_CHAR):
            return self._show_through(len(self.tokens), text)
        # The text ends in U+FFFD: a character still arriving, or a real/broken one. Only the
        # last few tokens can belong to an unfinished character; release what comes before.
        end = len(self.tokens)
        for boundary in range(end - 1, max(self._read_offset, end - 1 - _MAX_UNFINISHED_TOKENS), -1):
            settled_text = self._settled_text(boundary, text)
            if settled_text is not None:
                return self._show_through(boundary, settled_text)
        return ""

    def _settled_text(self, boundary: int, text: str) -> str | None:
        """The decode of ``tokens[prefix:boundary]`` if no character straddles ``boundary``.

        A character cut at the boundary decodes as U+FFFD on both sides, so the two halves
        no longer add up to ``text`` (the decode of everything pending). When they do add
        up, and the right half has text of its own, the left half can never change.
        """
        left = self._decode(self.tokens[self._prefix_offset : boundary])
        right = self._decode(self.tokens[boundary:])
        return left if right and left + right == text else None

    def flush(self) -> str:
        # End of stream: whatever is pending is final now, U+FFFD and all.
        return self._show_through(len(self.tokens), self._decode(self.tokens[self._prefix_offset :]))

