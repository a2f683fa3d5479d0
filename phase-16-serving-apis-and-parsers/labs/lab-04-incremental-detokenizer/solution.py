"""Lab 04 reference solution: incremental detokenization with the tokenizer's own ``decode``.

Two offsets into the token list do the bookkeeping (vLLM calls them prefix and read offsets):

    tokens:  [ .... already shown .... | context | pending ... ]
                                       ^prefix   ^read

- everything before ``read`` has been shown (or is the prompt's);
- ``prefix .. read`` is a little context, decoded again with every step, so the new text is
  read off against real neighbours (a SentencePiece decoder drops the first space of the
  string it decodes: ``▁This`` alone decodes to ``This``, after a context to `` This``);
- ``read ..`` is pending: tokens whose text is not certain yet.

Both offsets sit between characters. Each push decodes ``context + pending`` and, when that
does not end in U+FFFD, shows what goes past the context's text: that is the whole lesson.
When it does end in U+FFFD, a character may still be arriving, so wait; but a model can
also write U+FFFD itself, so once more than three tokens wait, release what lies before a
proven boundary (:meth:`IncrementalDetokenizer._is_boundary`) and the work stays bounded.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence

from mini_vllm.tokenizers.base import REPLACEMENT_CHAR, Tokenizer

# An unfinished character is at most 3 bytes, and every token holds at least one byte, so it
# lies within the last 3 tokens. Pending text longer than that holds something final.
_UNFINISHED_TOKENS = 3
# How far back __init__ looks for the prompt's last boundary. Usually one to three tokens; a
# token that ends one character and starts the next (b"\x8d\xf0\x9f") can push it further.
_PROMPT_LOOKBACK = 8


class IncrementalDetokenizer:
    """Streams the text of generated tokens, using only ``tokenizer.decode``.

    The concatenation of every ``push`` and the final ``flush`` is the output's text:
    ``decode(prompt + output)[len(decode(prompt)):]`` whenever the prompt ends between
    characters. A character the prompt leaves unfinished belongs to the output, shown with
    the token that completes it (or, if the output breaks it, as the output's U+FFFD).
    """

    # Set together by _set_prefix, wherever the context starts anew:
    _prefix: int
    _context_text: str  # decode(tokens[prefix:read])
    _texts: dict[int, str]  # end -> decode(tokens[prefix:end]) for the current prefix
    _window: list[int]  # tokens[prefix:], what push decodes: the context, then the pending tokens

    def __init__(self, tokenizer: Tokenizer, prompt_ids: Sequence[int] = (), window: int = 4,
                 skip_special_tokens: bool = False) -> None:
        if isinstance(window, bool) or not isinstance(window, int) or window < 1:
            raise ValueError(f"window must be an int >= 1, got {window!r}")
        self.skip_special_tokens = skip_special_tokens
        self._decode_ids = tokenizer.decode  # (bound once: push calls it on every token)
        self.tokens = list(prompt_ids)
        self._prompt_len = len(self.tokens)
        self._context_tokens = max(1, window - 1)
        self._longest_context = 2 * self._context_tokens  # then the prefix moves up (see _move_prefix)
        self._prefix, self._texts = 0, {}  # (the prompt is looked at from token 0)
        prompt_text = self._text_to(self._prompt_len)  # a bad prompt id raises here, not mid-stream
        # Set while `read` sits before a character the prompt leaves unfinished, until the output's
        # first text settles which characters past `read` are the prompt's own.
        self._prompt_unfinished = prompt_text.endswith(REPLACEMENT_CHAR)
        read = self._last_prompt_boundary(prompt_text) if self._prompt_unfinished else self._prompt_len
        self._read = self._start = read
        if read == self._prompt_len:
            prefix = self._prompt_context_start()
            self._set_prefix(prefix, self._decode(self.tokens[prefix:read]))
        else:
            self._set_prefix(read, "")
        self._starts = [self._prefix]  # earlier read offsets: boundaries where the context may start

    # ------------------------------------------------------------------ the lesson

    def push(self, token_id: int) -> str:
        window = self._window
        window.append(token_id)
        try:
            text = self._decode_ids(window, self.skip_special_tokens)
        except BaseException:
            window.pop()  # a bad id raises in decode, before any state changes
            raise
        self.tokens.append(token_id)
        if not text.endswith(REPLACEMENT_CHAR):
            return self._show_through(len(self.tokens), text)
        return self._wait(text)

    def flush(self) -> str:
        # End of stream: whatever is pending is final now, U+FFFD and all.
        end = len(self.tokens)
        text = self._text_to(end)
        if not text.startswith(self._context_text):
            # A byte-fallback decoder turns a whole byte run into U+FFFDs when its end is cut
            # off, the context's part too: decode the pending tokens on their own instead.
            self._set_prefix(self._read, "")
            text = self._text_to(end)
        return self._show_through(end, text)

    # ------------------------------------------------------------------ bookkeeping

    def _wait(self, text: str) -> str:
        """``text`` decodes the window and ends in U+FFFD: a character may still be arriving."""
        end = len(self.tokens)
        self._texts[end] = text
        if end - self._read <= _UNFINISHED_TOKENS:
            return ""  # it spans at most the last three tokens: wait for it
        # Text before those three is final once a boundary there is proven: release it (bounded work).
        rights: dict[int, str] = {}  # position -> decode(tokens[position:end]), shared by the proofs
        for position in range(end - _UNFINISHED_TOKENS, max(self._read, self._prompt_len), -1):
            if self._is_boundary(position, end, text, rights):
                return self._show_through(position, self._text_to(position))
        return ""

    def _decode(self, ids: Sequence[int]) -> str:
        return self._decode_ids(ids, self.skip_special_tokens)

    def _text_to(self, end: int) -> str:
        """``decode(tokens[prefix:end])``, remembered until the prefix moves."""
        if end not in self._texts:
            self._texts[end] = self._decode(self.tokens[self._prefix : end])
        return self._texts[end]

    def _show_through(self, read: int, text: str) -> str:
        """``read`` is a boundary and ``text`` decodes ``tokens[prefix:read]``: show what is new."""
        new_text = text[len(self._context_text) :]
        if self._prompt_unfinished:
            new_text = new_text[self._prompt_chars(new_text, read) :]
            self._prompt_unfinished = False
        self._read, self._context_text = read, text
        self._starts.append(read)
        if read - self._prefix >= self._longest_context:
            self._move_prefix()
        return new_text

    def _move_prefix(self) -> None:
        """Move the prefix up to the latest boundary that leaves ``window - 1`` tokens of context.

        Moving it costs a decode of the new context, so it moves in jumps (once the context has
        grown to twice that), not with every token. The new context must decode to some
        text: a context of skipped special tokens alone would let a SentencePiece decoder strip
        the first space of the *new* text.
        """
        starts = self._starts  # sorted, and it holds the prefix, which is always far enough back
        index = bisect_right(starts, self._read - self._context_tokens) - 1
        context_text = self._decode(self.tokens[starts[index] : self._read])
        if context_text:
            self._set_prefix(starts[index], context_text)
            del starts[:index]

    def _set_prefix(self, prefix: int, context_text: str) -> None:
        """The context now starts at ``prefix`` and decodes to ``context_text``; push decodes from there."""
        self._prefix, self._context_text, self._texts = prefix, context_text, {}
        self._window = self.tokens[prefix:]

    # ------------------------------------------------------------------ proofs, with decode alone

    def _is_boundary(self, position: int, end: int, text: str, rights: dict[int, str]) -> bool:
        """Whether no character straddles ``position``, a token position before ``end``.

        ``text`` decodes ``tokens[prefix:end]``; ``rights`` remembers ``decode(tokens[p:end])``.
        Proven with decode alone, in one of three ways:

        1. the text after it, decoded alone, starts with a character, not U+FFFD (a cut
           character leaves continuation bytes there, and those decode to U+FFFD);
        2. the two sides decoded apart add up to the whole, and the right side has fewer
           characters than tokens (so it holds a whole multi-token character, such as a
           model's own U+FFFD). Adding up alone proves nothing on a byte-fallback tokenizer,
           which turns each byte of a broken run into its own U+FFFD however it is cut;
        3. it is at least three tokens back (before any unfinished character) and every seam
           from it to the end adds up. On a byte-fallback tokenizer a whole character before an
           unfinished one breaks that at its own end. This releases a run of single-token U+FFFD,
           which proof 2 cannot see.
        """
        right = self._right(position, end, rights)
        if not right:
            return False
        if not right.startswith(REPLACEMENT_CHAR):
            return True
        if self._text_to(position) + right != text:
            return False
        return len(right) < end - position or (end - position >= _UNFINISHED_TOKENS and all(
            self._text_to(seam) + self._right(seam, end, rights) == text for seam in range(end - 1, position, -1)))

    def _right(self, position: int, end: int, rights: dict[int, str]) -> str:
        if position not in rights:
            rights[position] = self._decode(self.tokens[position:end])
        return rights[position]

    # ------------------------------------------------------------------ a prompt that ends inside a character

    def _last_prompt_boundary(self, prompt_text: str) -> int:
        """The latest position before the prompt's end that no character straddles (0 if none is found near it).

        Called once, with the prefix at 0. Besides the three proofs, a position inside the prompt
        is a boundary when the text before it does not end in U+FFFD: its last character is whole.
        (After a push this never helps: had the text there been clean, ``read`` would be there.)
        """
        rights: dict[int, str]
        last, rights = self._prompt_len, {}
        for position in range(last - 1, max(0, last - _PROMPT_LOOKBACK), -1):
            before = self._text_to(position)
            if (before and not before.endswith(REPLACEMENT_CHAR)) or self._is_boundary(position, last, prompt_text,
                                                                                       rights):
                return position
        return 0

    def _prompt_context_start(self) -> int:
        """A boundary at least ``window - 1`` tokens before the prompt's (clean) end, found near it."""
        last = self._prompt_len
        for start in range(last - self._context_tokens, max(0, last - self._context_tokens - _PROMPT_LOOKBACK), -1):
            text = self._decode(self.tokens[start:last])
            if text and not text.startswith(REPLACEMENT_CHAR):
                return start
        return 0

    def _prompt_chars(self, new_text: str, read: int) -> int:
        """How many characters at the start of ``new_text`` (``tokens[start:read]`` decoded) are the prompt's.

        First find the latest seam inside the prompt's tail where the output's first text adds
        up (a seam of a settled text that adds up is a boundary): everything before it is the
        prompt's. If that is the prompt's end, the prompt ended between characters after all
        (say, in a real U+FFFD). Past the seam, the tail is the prompt's complete characters (a
        token such as ``b" \\xf0\\x9f"`` holds a whole space) and then U+FFFD for the unfinished
        one, or one U+FFFD per byte token on a byte-fallback tokenizer, with nothing whole.
        """
        last = self._prompt_len
        seam = next(q for q in range(last, self._start - 1, -1) if self._adds_up_to(new_text, q, read))
        head, tail = self._decode(self.tokens[self._start : seam]), self._decode(self.tokens[seam:last])
        if all(self._decode([t]) == REPLACEMENT_CHAR for t in self.tokens[seam:last]) and (
                tail == REPLACEMENT_CHAR * (last - seam)):
            return len(head)  # byte tokens of the unfinished character: nothing whole
        return len(head) + max(0, min(_shared_length(tail, new_text[len(head) :]), len(tail) - 1))

    def _adds_up_to(self, text: str, seam: int, read: int) -> bool:
        """Whether ``tokens[start:seam]`` and ``tokens[seam:read]`` decoded apart give ``text`` (from ``start``)."""
        head, rest = self._decode(self.tokens[self._start : seam]), self._decode(self.tokens[seam:read])
        return text in (head + rest, head + " " + rest)  # (alone, a SentencePiece output loses its first space)


def _shared_length(a: str, b: str) -> int:
    """How many characters ``a`` and ``b`` share at their start."""
    return next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
