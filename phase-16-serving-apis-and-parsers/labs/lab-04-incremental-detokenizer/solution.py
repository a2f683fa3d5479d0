"""Lab 04 reference solution: incremental detokenization with the tokenizer's own ``decode``.

Two offsets into the token list do the bookkeeping (vLLM calls them prefix and read offsets):

    tokens:  [ .... already shown .... | context | pending ... ]
                                       ^prefix   ^read

- everything before ``read`` has been shown (or is the prompt's);
- ``prefix .. read`` is a little context, decoded again with every step, so the new text
  is read off against real neighbours: a SentencePiece tokenizer drops the first space of
  a decoded string, so ``▁This`` alone decodes to ``This`` but after a context to `` This``;
- ``read ..`` is pending: tokens whose text is not certain yet.

Both offsets always sit *between characters* (on a "boundary"). A context that began in
the middle of a character would decode to U+FFFD at its start, and on a byte-fallback
tokenizer that U+FFFD spreads over the whole run of byte tokens, valid characters included.

Each push decodes ``context + pending``. If that does not end in U+FFFD, everything is
settled: show what goes past the context's text. If it does, a character may still be
arriving; only its last few tokens can be unfinished, so look for a boundary among them
and release what lies before it. A token position is a proven boundary when

1. the text after it, decoded alone, does not start with U+FFFD (a cut character would
   leave continuation bytes there, which always decode to U+FFFD), or
2. the two sides decoded apart add up to the whole, and the right side has fewer
   characters than tokens. Adding up alone is not enough: a bad run of byte-fallback
   tokens gives one U+FFFD per byte however it is cut. Fewer characters than tokens proves
   the right side holds a whole multi-token character (a model's own U+FFFD, say), or
3. (inside the prompt) the text before it does not end in U+FFFD: its last character is complete.

A prompt may end inside a character. Then ``read`` starts at the last boundary before
that character, and the prompt's own characters past it are counted (``_hidden``) once
the first output text settles, so they are skipped, while the character the output
completes is shown.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial

from mini_vllm.tokenizer_base import REPLACEMENT_CHAR, Tokenizer

# An unfinished character is at most 3 bytes, so it spans at most the last 3 tokens.
_MAX_UNFINISHED_TOKENS = 3


class IncrementalDetokenizer:
    """Streams the text of generated tokens, using only ``tokenizer.decode``.

    The concatenation of every ``push`` and the final ``flush`` is the output's text:
    ``decode(prompt + output)[len(decode(prompt)):]`` whenever the prompt ends between
    characters. The prompt's complete characters are never shown; a character the prompt
    leaves unfinished belongs to the output, shown with the token that completes it.
    """

    def __init__(self, tokenizer: Tokenizer, prompt_ids: Sequence[int] = (), window: int = 4,
                 skip_special_tokens: bool = False) -> None:
        if isinstance(window, bool) or not isinstance(window, int) or window < 1:
            raise ValueError(f"window must be an int >= 1, got {window!r}")
        self.tokenizer = tokenizer
        self.window = window
        self.skip_special_tokens = skip_special_tokens
        self.tokens = list(prompt_ids)
        prompt_text = self._decode(self.tokens)  # once, to reject a bad prompt id here rather than mid-stream
        self._prompt_len = len(self.tokens)
        self._skipped = set(tokenizer.all_special_ids) if skip_special_tokens else set()
        self._boundaries = [0]  # known boundaries, oldest first (the prefix is chosen among them)
        self._prefix = self._read = 0
        self._context_text = ""
        self._texts: dict[int, str] = {}  # end -> decode(tokens[prefix:end]), for the current prefix
        # Prompt characters past `read` that must not be shown; None until the prompt's end is resolved.
        self._hidden: int | None = 0
        start = self._last_prompt_boundary(prompt_text)
        self._boundaries += self._boundaries_before(start)
        if start < self._prompt_len:
            self._hidden = None
        self._move_to(start)

    # ------------------------------------------------------------------ helpers

    def _decode(self, ids: Sequence[int]) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=self.skip_special_tokens)

    def _text_to(self, end: int) -> str:
        """``decode(tokens[prefix:end])``, remembered until the prefix moves."""
        if end not in self._texts:
            self._texts[end] = self._decode(self.tokens[self._prefix : end])
        return self._texts[end]

    def _proven_boundary(self, position: int, whole: str, left: Callable[[], str], left_may_be_clean: bool) -> bool:
        """Whether no character straddles ``position``; ``left()`` and ``whole`` decode from the same start.

        The right side is tried first: it is at most a few tokens. The left side's last character
        is only worth a look at a position no earlier push ended on (a prompt position): wherever
        a push ended with the text not ending in U+FFFD, ``read`` moved there already.
        """
        right = self._decode(self.tokens[position:])
        if right and not right.startswith(REPLACEMENT_CHAR):
            return True
        visible = sum(1 for token_id in self.tokens[position:] if token_id not in self._skipped)
        if right and len(right) < visible and left() + right == whole:
            return True
        if not left_may_be_clean:
            return False
        before = left()
        return bool(before) and not before.endswith(REPLACEMENT_CHAR)

    def _last_prompt_boundary(self, prompt_text: str) -> int:
        """The last boundary at or before the prompt's end (one pass over the prompt, done once)."""
        end = len(self.tokens)
        if not prompt_text.endswith(REPLACEMENT_CHAR):
            return end
        for position in range(end - 1, max(0, end - 1 - _MAX_UNFINISHED_TOKENS), -1):
            left = partial(self._decode, self.tokens[:position])
            if self._proven_boundary(position, prompt_text, left, left_may_be_clean=True):
                return position
        return 0

    def _boundaries_before(self, position: int) -> list[int]:
        """A few proven boundaries just before ``position``, so the context can start near it."""
        found = []
        target = position - max(1, self.window - 1)
        for candidate in range(target, max(0, target - 2 * _MAX_UNFINISHED_TOKENS), -1):
            right = self._decode(self.tokens[candidate:position])
            if right and not right.startswith(REPLACEMENT_CHAR):
                found.append(candidate)
                break
        return [*found, position] if position else []

    def _move_to(self, read: int) -> None:
        """Everything before ``read`` is shown; keep a context of at least ``window - 1`` tokens (and one)."""
        self._read = read
        if read != self._boundaries[-1]:
            self._boundaries.append(read)
        # At least one token it will show (not a skipped special): a SentencePiece decoder strips
        # the first space of the decoded string, and that must be the context's, never the new text's.
        keep = max(1, self.window - 1)
        prefix = self._boundaries[0]
        for boundary in reversed(self._boundaries):
            if sum(1 for t in self.tokens[boundary:read] if t not in self._skipped) >= keep:
                prefix = boundary
                break
        self._boundaries = [b for b in self._boundaries if b >= prefix]
        if prefix != self._prefix:
            self._prefix, self._texts = prefix, {}
        self._context_text = self._text_to(read)

    def _resolve_hidden(self, text: str, end: int) -> int:
        """How many characters of ``text`` (the decode up to ``end``) past the context are the prompt's."""
        last = self._prompt_len
        for cut in range(last, max(self._read, last - _MAX_UNFINISHED_TOKENS) - 1, -1):
            head, tail = self._text_to(cut), self._decode(self.tokens[cut:end])
            if text in (head + tail, head + " " + tail):  # (alone, a SentencePiece tail loses its first space)
                break
        else:
            cut, head = self._read, self._context_text
        return len(head) - len(self._context_text) + self._prompt_units_after(cut, head, text)

    def _prompt_units_after(self, cut: int, head: str, text: str) -> int:
        """Whole prompt characters between the boundary ``cut`` and the prompt's end.

        Only a byte-level token can hold some (e.g. ``b" \\xf0\\x9f"``: a space, then half an
        emoji). The prompt's own decode past ``cut`` is then those characters plus one U+FFFD for
        the unfinished one. On a byte-fallback tokenizer there are none: its byte tokens hold
        one byte each, and their U+FFFDs (one per byte) must not be mistaken for characters.
        """
        last = self._prompt_len
        prompt_text = self._text_to(last)
        if cut == last or not prompt_text.startswith(head):
            return 0
        own = prompt_text[len(head) :]
        visible = sum(1 for token_id in self.tokens[cut:last] if token_id not in self._skipped)
        if own == REPLACEMENT_CHAR * visible or not text[len(head) :].startswith(own[:-1]):
            return 0
        return len(own) - 1

    def _show_through(self, read: int, text: str) -> str:
        """``text`` decodes ``tokens[prefix:read]`` and ``read`` is a boundary: show what is new."""
        if read <= self._prompt_len:
            new_text = ""  # still inside the prompt
        else:
            if self._hidden is None:
                self._hidden = self._resolve_hidden(text, read)
            new_text = text[len(self._context_text) + self._hidden :]
            self._hidden = 0
        self._move_to(read)
        return new_text

    # ------------------------------------------------------------------ the lesson

    def push(self, token_id: int) -> str:
        text = self._decode([*self.tokens[self._prefix :], token_id])  # a bad id raises here, state intact
        self.tokens.append(token_id)
        end = len(self.tokens)
        self._texts[end] = text
        if not text.endswith(REPLACEMENT_CHAR):
            return self._show_through(end, text)
        # A character still arriving, or a real/broken one. Only the last few tokens can belong to
        # an unfinished character: release what comes before the latest proven boundary.
        for position in range(end - 1, max(self._read, end - 1 - _MAX_UNFINISHED_TOKENS), -1):
            left = partial(self._text_to, position)
            if self._proven_boundary(position, text, left, left_may_be_clean=position <= self._prompt_len):
                return self._show_through(position, left())
        return ""

    def flush(self) -> str:
        # End of stream: whatever is pending is final now, U+FFFD and all.
        end = len(self.tokens)
        if end <= max(self._read, self._prompt_len):
            return ""
        text = self._text_to(end)
        if text.startswith(self._context_text):
            return self._show_through(end, text)
        # On a byte-fallback tokenizer an unfinished tail spoils its whole byte run, the context's
        # part included: decode the pending tokens on their own (they start on a boundary).
        pending = self._decode(self.tokens[self._read :])
        hidden = self._hidden or 0
        self._hidden = 0
        self._move_to(end)
        return pending[hidden:]
