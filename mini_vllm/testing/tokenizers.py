"""Tokenizers made for tests.

- :class:`PieceTokenizer` has exactly the vocabulary a test asks for, so a test can feed
  any byte string cut at any points: the "arbitrary split into tokens" that real BPE
  vocabularies produce, without needing a vocabulary that happens to contain them.
- :class:`CountingTokenizer` counts the work a detokenizer asks of ``decode``.
"""

from __future__ import annotations

from collections.abc import Sequence

from mini_vllm.tokenizer_base import Tokenizer, check_token_id


class PieceTokenizer:
    """Token i stands for ``pieces[i]``; one extra id at the end is an EOS special token."""

    EOS_TEXT = "<|endoftext|>"

    def __init__(self, pieces: Sequence[bytes]) -> None:
        self.pieces = list(pieces)

    @property
    def vocab_size(self) -> int:
        return len(self.pieces) + 1

    @property
    def eos_token_id(self) -> int:
        return len(self.pieces)

    @property
    def all_special_ids(self) -> list[int]:
        return [self.eos_token_id]

    def ids(self) -> list[int]:
        """The ids that spell all the pieces in order."""
        return list(range(len(self.pieces)))

    def encode(self, text: str) -> list[int]:
        raise NotImplementedError("PieceTokenizer only decodes: build it from the pieces you want")

    def decode_single_token_bytes(self, token_id: int) -> bytes:
        check_token_id(token_id, self.vocab_size)
        return self.EOS_TEXT.encode() if token_id == self.eos_token_id else self.pieces[token_id]

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = False) -> str:
        data = b"".join(
            self.decode_single_token_bytes(i) for i in ids if not (skip_special_tokens and i == self.eos_token_id)
        )
        return data.decode("utf-8", errors="replace")

    def convert_ids_to_tokens(self, ids: Sequence[int]) -> list[str]:
        return [repr(self.decode_single_token_bytes(i)) for i in ids]


class CountingTokenizer:
    """Wraps a tokenizer and counts the token ids passed to ``decode``: cost as a number, not a time.

    Only ``decode`` (and the plain attributes) are offered: code that is supposed to be
    built on ``decode`` alone fails loudly here if it reaches for the raw bytes.
    """

    def __init__(self, inner: Tokenizer) -> None:
        self.inner = inner
        self.ids_decoded = 0
        self.decode_calls = 0

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
