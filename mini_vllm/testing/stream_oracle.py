"""What an incremental detokenizer must show, worked out from token bytes and the standard library.

Lab-04's tests need an answer that does not come from a detokenizer: this module reads
the contract directly off the bytes. Every token stands for some raw bytes
(``decode_single_token_bytes``); the bytes of prompt + output are cut into *units* the way
Python's UTF-8 decoder cuts them (a character, or one U+FFFD for each maximal invalid
piece), and each unit is given to whoever finishes it:

- a unit whose last byte lies in the prompt is the prompt's, and is never shown;
- a unit whose last byte lies in the output is the output's, shown with the token that
  holds that byte (a character's valid start that the next byte breaks: with that next byte);
- a piece still unfinished when the stream ends is shown at flush, as U+FFFD: one for the
  whole piece on byte-level tokenizers, one per byte on the SentencePiece family
  (its ByteFallback decoder replaces each byte of a bad run);
- on the SentencePiece family, ``decode`` strips the first space of the decoded text: if
  the output starts the visible text and starts with a space, that space is never shown.

For a prompt that ends between characters this is exactly
``decode(prompt + output)[len(decode(prompt)):]``. For a prompt that ends inside a
character it says what that formula cannot: the character belongs to the output.
"""

from __future__ import annotations

import bisect
import codecs
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import accumulate
from typing import Any

REPLACEMENT_CHAR = "\ufffd"


@dataclass(frozen=True)
class Unit:
    """One piece of decoded text and the bytes ``data[start:end]`` it came from."""

    text: str
    start: int
    end: int
    valid: bool


def utf8_units(data: bytes) -> list[Unit]:
    """``data`` cut the way ``data.decode("utf-8", "replace")`` cuts it (its texts join to that string)."""
    units: list[Unit] = []
    i = 0
    while i < len(data):
        try:
            valid, bad = data[i:].decode("utf-8"), None
        except UnicodeDecodeError as error:
            # The strict decoder stops at the same piece "replace" writes one U+FFFD for (its "maximal
            # subpart"): [start, end) of the error, counted from i.
            valid, bad = data[i : i + error.start].decode("utf-8"), (i + error.start, i + error.end)
        for char in valid:
            size = 1 if char < "\x80" else 2 if char < "\u0800" else 3 if char < "\U00010000" else 4
            units.append(Unit(char, i, i + size, True))
            i += size
        if bad is not None:
            units.append(Unit(REPLACEMENT_CHAR, *bad, False))
            i = bad[1]
    return units


def is_unfinished(piece: bytes) -> bool:
    """Whether ``piece`` is the start of a character that more bytes could still complete."""
    decoder = codecs.getincrementaldecoder("utf-8")("strict")
    try:
        return decoder.decode(piece) == "" and piece != b""
    except UnicodeDecodeError:
        return False


@dataclass(frozen=True)
class ExpectedStream:
    per_token: list[str]  # the text each output token finishes
    at_flush: str  # what only the end of the stream releases
    settled: list[bool]  # after token k, is nothing ambiguous? (all finished, and not ending in U+FFFD)

    @property
    def text(self) -> str:
        return "".join(self.per_token) + self.at_flush


def expected_stream(prompt_bytes: Sequence[bytes], output_bytes: Sequence[bytes], *,
                    strips_leading_space: bool = False, per_byte_replacement: bool = False) -> ExpectedStream:
    """The contract, for a prompt and an output given as the raw bytes of their (visible) tokens."""
    prompt_len = sum(len(b) for b in prompt_bytes)
    data = b"".join([*prompt_bytes, *output_bytes])
    token_ends = [prompt_len + n for n in accumulate(len(b) for b in output_bytes)]
    units = utf8_units(data)
    # After a token, nothing is ambiguous when its last byte ends a whole character other than U+FFFD
    # (a character is decided by its own bytes, so this holds for the prefix exactly as for the whole).
    clean_ends = {unit.end for unit in units if unit.valid and unit.text != REPLACEMENT_CHAR}
    settled = [end in clean_ends or end == 0 for end in token_ends]
    if strips_leading_space and prompt_len == 0 and units and units[0].text == " ":
        units = units[1:]  # decode strips it: the output's first space is never text
    per_token = [""] * len(output_bytes)
    at_flush = ""
    for unit in units:
        if unit.end <= prompt_len:
            continue  # the prompt finished it
        cut_short = not unit.valid and is_unfinished(data[unit.start : unit.end])
        if cut_short and unit.end == len(data):
            at_flush += REPLACEMENT_CHAR * (unit.end - unit.start if per_byte_replacement else 1)
            continue
        # A unit shows with the token holding its last byte; a piece that was a character's valid
        # start shows with the token whose byte breaks it.
        deciding_byte = unit.end if cut_short else unit.end - 1
        token = bisect.bisect_right(token_ends, deciding_byte)  # the first token ending past it
        per_token[token] += unit.text
    return ExpectedStream(per_token, at_flush, settled)


def decodes_like_sentencepiece(tokenizer: Any) -> bool:
    """Whether ``tokenizer.decode`` strips the first space of what it decodes (and writes one U+FFFD per byte
    of a broken run), as the SentencePiece family does: :func:`expected_stream`'s two switches.

    Read off the tokenizer's behaviour, so a new family needs no entry here.
    """
    ids = tokenizer.encode("Hello world")
    word = next(k for k in range(1, len(ids)) if tokenizer.decode_single_token_bytes(ids[k]).startswith(b" "))
    return not tokenizer.decode(ids[word:]).startswith(" ")
