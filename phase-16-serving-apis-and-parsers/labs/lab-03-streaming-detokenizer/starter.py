"""Lab 03 starter: stream bytes as text without ever emitting half a character.

Fill in the three tasks below (see README.md, "Your task"). Run the tests with:

    make lab-03
"""

from __future__ import annotations

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
        raise NotImplementedError("lab-03 task 2: implement StreamingDetokenizer.feed — see README, 'Your task'")

    def flush(self) -> str:
        """End of stream: return whatever is still held, decoded honestly."""
        raise NotImplementedError("lab-03 task 3: implement StreamingDetokenizer.flush — see README, 'Your task'")
