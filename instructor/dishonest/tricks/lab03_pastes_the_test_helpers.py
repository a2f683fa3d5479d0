# A lab-03 submission (issue 42's table): the starter, with the test file's own helpers (character_starts,
# unfinished_tail) pasted in and feed and flush written around them; task 1 not implemented. The README says
# the definition is given and what it earns: at most tasks 2 and 3 (65 points); this one keeps the whole
# stream, so it earns less (tests/test_grader_sandbox.py grades it).
"""Lab 03 starter: stream bytes as text without ever emitting half a character.

Fill in the three tasks below (see README.md, "Your task"). Run the tests with:

    make lab-03
"""

from __future__ import annotations

import functools

from mini_vllm.tokenizers.base import Tokenizer


def utf8_expected_len(lead_byte: int) -> int:
    """Length of the UTF-8 sequence that ``lead_byte`` starts (1-4), or 0 if it starts none.

    Continuation bytes start nothing; neither do C0, C1 and F5..FF (README, "Background").
    """
    raise NotImplementedError("lab-03 task 1: implement utf8_expected_len — see README, 'Your task'")


class StreamingDetokenizer:
    """Turns token ids into text one token at a time, emitting only whole characters.

    ``feed(id)`` returns the text that became certain with that token ("" while a
    character is unfinished); ``flush()`` releases what is still held at the end of
    the stream. Their concatenation must equal decoding all the bytes at once with
    ``errors="replace"``. Special tokens (EOS, chat markers) produce no text.
    """

    def __init__(self, tokenizer: Tokenizer) -> None:
        self.tokenizer = tokenizer
        self.held_bytes = b""  # keep this up to date: the tests read it (at most 3 bytes)
        self._special_ids = frozenset(tokenizer.all_special_ids)

    def feed(self, token_id: int) -> str:
        """Add one token; return the text that is now certain (maybe "")."""
        data = self.tokenizer.decode_single_token_bytes(token_id)  # (raises for a bad id, before any change)
        if token_id in self._special_ids:
            return ""
        self._stream = getattr(self, "_stream", b"") + data  # the whole stream so far
        self.held_bytes = unfinished_tail(self._stream)
        certain = self._stream[: len(self._stream) - len(self.held_bytes)].decode("utf-8", "replace")
        out, self._shown = certain[len(getattr(self, "_shown", "")):], certain
        return out

    def flush(self) -> str:
        """End of stream: return whatever is still held, decoded honestly."""
        text = self.held_bytes.decode("utf-8", "replace")
        self._stream, self._shown, self.held_bytes = b"", "", b""
        return text


@functools.cache
def character_starts() -> frozenset[bytes]:
    """Every byte string that is the unfinished start of some real character.

    Brute force over the code points, as the definition: a proper prefix of the UTF-8
    encoding of any code point (surrogates are not characters). Stepping by 64 visits
    every distinct prefix, since a prefix never includes a character's last byte.
    """
    starts = set()
    for code_point in range(0x80, 0x110000, 64):
        if not 0xD800 <= code_point <= 0xDFFF:
            encoded = chr(code_point).encode("utf-8")
            starts.update(encoded[:k] for k in range(1, len(encoded)))
    return frozenset(starts)


def unfinished_tail(data: bytes) -> bytes:
    """The longest suffix of ``data`` that could still become a character: what must be held."""
    return next((data[-k:] for k in (3, 2, 1) if len(data) >= k and data[-k:] in character_starts()), b"")
