"""Lab 03 reference solution: stream bytes as text without ever emitting half a character.

The whole idea: after each token, everything up to the last *unfinished* character can
be shown now, and nothing after it can. UTF-8 makes "unfinished" decidable from the
last three bytes alone, so the held part never grows past three bytes.
"""

from __future__ import annotations

from mini_vllm.tokenizers.base import Tokenizer

# For the lead bytes that open a 3- or 4-byte sequence, RFC 3629 narrows the range of
# the *second* byte: anything else would be an overlong form (E0, F0), a UTF-16
# surrogate (ED) or a code point above U+10FFFF (F4). Every other lead accepts 80..BF.
_SECOND_BYTE_RANGE: dict[int, tuple[int, int]] = {
    0xE0: (0xA0, 0xBF),
    0xED: (0x80, 0x9F),
    0xF0: (0x90, 0xBF),
    0xF4: (0x80, 0x8F),
}


def utf8_expected_len(lead_byte: int) -> int:
    """Length of the UTF-8 sequence that ``lead_byte`` starts, or 0 if it starts none.

    0xxxxxxx -> 1, 110xxxxx -> 2, 1110xxxx -> 3, 11110xxx -> 4. Continuation bytes
    (10xxxxxx) start nothing, and neither do C0/C1 (they could only spell ASCII the
    long way round) or F5..FF (they would encode past U+10FFFF).
    """
    if lead_byte <= 0x7F:
        return 1
    if 0xC2 <= lead_byte <= 0xDF:
        return 2
    if 0xE0 <= lead_byte <= 0xEF:
        return 3
    if 0xF0 <= lead_byte <= 0xF4:
        return 4
    return 0


def _unfinished_tail_len(data: bytes) -> int:
    """How many bytes at the end of ``data`` begin a character that could still complete.

    An unfinished character is at most 3 bytes (4 would be finished), so only the last
    three bytes can matter: walk back over continuation bytes (10xxxxxx) to the byte
    that starts the last character, then ask whether what follows it is a valid start
    of a character that is still missing bytes. Anything else (a finished character,
    or bytes that are already invalid) is final: no later byte can change its text.
    """
    if not data or data[-1] < 0x80:
        return 0  # ends in ASCII, the common case: nothing can be unfinished
    for back in (1, 2, 3):
        if back > len(data):
            return 0
        lead = data[-back]
        if 0x80 <= lead <= 0xBF:
            continue  # a continuation byte: keep walking back
        if back >= utf8_expected_len(lead):
            return 0  # finished, or a byte that starts nothing (expected length 0)
        if back > 1:
            low, high = _SECOND_BYTE_RANGE.get(lead, (0x80, 0xBF))
            if not low <= data[-back + 1] <= high:
                return 0  # can never become a character: decode it (as U+FFFD) now
        return back
    return 0  # three continuation bytes: orphans or a finished 4-byte character, final either way


class StreamingDetokenizer:
    """Turns token ids into text one token at a time, emitting only whole characters.

    ``feed(id)`` returns the text that became certain with that token ("" while a
    character is unfinished); ``flush()`` releases what is still held at the end of
    the stream. Their concatenation equals decoding all the bytes at once with
    ``errors="replace"``. Special tokens (EOS, chat markers) produce no text.
    """

    def __init__(self, tokenizer: Tokenizer) -> None:
        self.tokenizer = tokenizer
        self.held_bytes = b""  # the unfinished character at the end of the stream (<= 3 bytes)
        self._special_ids = frozenset(tokenizer.all_special_ids)

    def feed(self, token_id: int) -> str:
        # Ask the tokenizer first: it raises ValueError on a bad id, before any state changes.
        token_bytes = self.tokenizer.decode_single_token_bytes(token_id)
        if token_id in self._special_ids:
            return ""
        data = self.held_bytes + token_bytes if self.held_bytes else token_bytes
        ready = len(data) - _unfinished_tail_len(data)
        self.held_bytes = data[ready:]
        # Invalid bytes inside `ready` are final, so U+FFFD for them is the honest answer.
        return data[:ready].decode("utf-8", "replace")

    def flush(self) -> str:
        # End of stream: an unfinished character will never finish. Say so with U+FFFD.
        text = self.held_bytes.decode("utf-8", errors="replace")
        self.held_bytes = b""
        return text
