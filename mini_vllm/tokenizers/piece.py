"""A tokenizer with exactly the vocabulary a test asks for.

Token ``i`` stands for ``pieces[i]``, so a test can feed any byte string cut at any points: the
"arbitrary split into tokens" real BPE vocabularies produce, without a vocabulary that happens
to contain them. It lives in the engine (not the test kit) so the grading sandbox can rebuild
it from its pieces on the other side instead of calling back for every token.
"""

from __future__ import annotations

from collections.abc import Sequence

from mini_vllm.tokenizers.base import check_token_id


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

    def sandbox_mirror(self) -> tuple[str, list[bytes]]:
        return "pieces", self.pieces
