"""Hypothesis strategies shared by every lab's tests (one place, as in minitorch).

The byte and text strategies lean towards the inputs that break streaming code:
UTF-8 lead and continuation bytes, the invalid ones, and multi-byte characters.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise
from typing import TypeVar

from hypothesis import strategies as st

T = TypeVar("T", str, bytes)

# Bytes chosen from every row of the UTF-8 table, including the edges of each range.
INTERESTING_BYTES: tuple[int, ...] = (
    0x00, 0x41, 0x7F,              # ASCII
    0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF,  # continuation bytes (edges of the narrowed ranges)
    0xC0, 0xC1, 0xC2, 0xC3, 0xDF,  # 2-byte leads (C0/C1 invalid)
    0xE0, 0xE4, 0xED, 0xEF,        # 3-byte leads (E0 and ED narrow the next byte)
    0xF0, 0xF4, 0xF5, 0xFF,        # 4-byte leads (F0/F4 narrow the next byte, F5.. invalid)
)

# A few characters of every UTF-8 length, including ones the shipped BPE splits.
MULTILINGUAL_CHARS = "aZ09 \n!<>é€ü—ñ你好服务器乱码字节日本語한국어🚀🫨😊🍜🇫🇷"


def any_bytes(max_size: int = 40) -> st.SearchStrategy[bytes]:
    """Arbitrary bytes, biased towards UTF-8 structure and real encoded text."""
    biased = st.lists(st.sampled_from(INTERESTING_BYTES) | st.integers(0, 255), max_size=max_size).map(bytes)
    encoded = multilingual_text(max_size=max_size // 3).map(lambda text: text.encode("utf-8"))
    # Real text with random bytes dropped: truncated and orphaned sequences.
    damaged = st.tuples(encoded, st.sets(st.integers(0, max_size))).map(
        lambda pair: bytes(b for i, b in enumerate(pair[0]) if i not in pair[1])
    )
    return st.one_of(biased, encoded, damaged)


def multilingual_text(max_size: int = 40) -> st.SearchStrategy[str]:
    """Text mixing ASCII, accents, CJK, emoji (and any other code point now and then)."""
    alphabet = st.sampled_from(MULTILINGUAL_CHARS) | st.characters(exclude_categories=["Cs"])
    return st.text(alphabet=alphabet, max_size=max_size)


@st.composite
def chunkings(draw: st.DrawFn, whole: T) -> list[T]:
    """Any split of ``whole`` into non-empty consecutive pieces."""
    cuts = draw(st.sets(st.integers(1, max(1, len(whole) - 1)), max_size=len(whole))) if len(whole) > 1 else set()
    return split_at(whole, sorted(cuts))


def split_at(whole: T, cuts: Sequence[int]) -> list[T]:
    """``whole`` cut at the given increasing positions (empty pieces dropped)."""
    bounds = [0, *cuts, len(whole)]
    return [whole[a:b] for a, b in pairwise(bounds) if a < b]
