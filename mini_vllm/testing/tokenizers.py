"""Tokenizers made for tests.

- :class:`PieceTokenizer` has exactly the vocabulary a test asks for, so a test can feed
  any byte string cut at any points: the "arbitrary split into tokens" that real BPE
  vocabularies produce, without needing a vocabulary that happens to contain them.
- :class:`CountingTokenizer` counts the work a detokenizer asks of ``decode``.
"""

from __future__ import annotations

from collections.abc import Sequence

from mini_vllm.tokenizers.base import Tokenizer
from mini_vllm.tokenizers.piece import PieceTokenizer

__all__ = ["CountingTokenizer", "PieceTokenizer"]


class CountingTokenizer:
    """Wraps a tokenizer and counts the token ids passed to ``decode``: cost as a number, not a time.

    Only ``decode`` (and the plain attributes) are offered: code that is supposed to be
    built on ``decode`` alone fails loudly here if it reaches for the raw bytes.
    """

    # In the grading sandbox this object stays here and graded code gets a stand-in whose decode,
    # encode and convert_ids_to_tokens are served from here (mini_vllm/sandbox/served.py): the count
    # is kept where graded code cannot reach it.
    sandbox_interface = "counting-tokenizer"

    def __init__(self, inner: Tokenizer) -> None:
        self.inner = inner
        self.ids_decoded = 0
        self.decode_calls = 0
        self.limit: int | None = None  # past this many ids decoded, decode refuses: a cost test stops there

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
        if self.limit is not None and self.ids_decoded > self.limit:
            raise AssertionError(f"{self.ids_decoded:,} token ids decoded, far over this test's budget: the cost "
                                 "test stops here (is something re-decoding the history?)")
        return self.inner.decode(ids, skip_special_tokens=skip_special_tokens)

    def decode_single_token_bytes(self, token_id: int) -> bytes:
        raise AssertionError("this lab is built on tokenizer.decode only: no raw token bytes")

    def convert_ids_to_tokens(self, ids: Sequence[int]) -> list[str]:
        return self.inner.convert_ids_to_tokens(ids)
