"""Tokenizers made for tests.

- :class:`PieceTokenizer` has exactly the vocabulary a test asks for, so a test can feed
  any byte string cut at any points: the "arbitrary split into tokens" that real BPE
  vocabularies produce, without needing a vocabulary that happens to contain them.
- :class:`CountingTokenizer` counts the work a detokenizer asks of ``decode``.
"""

from __future__ import annotations

from collections.abc import Sequence

from mini_vllm.piece_tokenizer import PieceTokenizer
from mini_vllm.tokenizer_base import Tokenizer

__all__ = ["CountingTokenizer", "PieceTokenizer"]


class CountingTokenizer:
    """Wraps a tokenizer and counts the token ids passed to ``decode``: cost as a number, not a time.

    Only ``decode`` (and the plain attributes) are offered: code that is supposed to be
    built on ``decode`` alone fails loudly here if it reaches for the raw bytes.
    """

    def __init__(self, inner: Tokenizer) -> None:
        self.inner = inner
        self.ids_decoded = 0
        self.decode_calls = 0

    def sandbox_mirror(self) -> tuple[str, Tokenizer]:
        """In the grading sandbox the code under test gets a stand-in that decodes with ``inner``
        there and reports each decode back with the call's reply (:mod:`mini_vllm.sandbox.mirrors`):
        the count is kept here, as exactly as a call back would keep it, without a round trip."""
        return "counting-tokenizer", self.inner

    def sandbox_account(self, counts: dict[str, int]) -> None:
        self.decode_calls += counts.get("decode_calls", 0)
        self.ids_decoded += counts.get("ids_decoded", 0)

    @property
    def vocab_size(self) -> int:
        return self.inner.vocab_size

    @property
    def eos_token_id(self) -> int:
        return self.inner.eos_token_id

    @property
    def all_special_ids(self) -> list[int]:
        return self.inner.all_special_ids

    def encode(self, text: str) -> list[int]:
        return self.inner.encode(text)

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = False) -> str:
        self.decode_calls += 1
        self.ids_decoded += len(ids)
        return self.inner.decode(ids, skip_special_tokens=skip_special_tokens)

    def decode_single_token_bytes(self, token_id: int) -> bytes:
        raise AssertionError("this lab is built on tokenizer.decode only: no raw token bytes")

    def convert_ids_to_tokens(self, ids: Sequence[int]) -> list[str]:
        return self.inner.convert_ids_to_tokens(ids)
