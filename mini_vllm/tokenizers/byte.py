"""The byte tokenizer: one token per UTF-8 byte, plus a few special tokens.

This is the hardest case for streaming: every character outside ASCII arrives in
pieces, so every lab is tested on it first.
"""

from __future__ import annotations

from collections.abc import Sequence

from mini_vllm.tokenizers.base import check_token_id, split_on_special

SPECIAL_TOKENS: tuple[str, ...] = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")


class ByteTokenizer:
    """Ids 0-255 are the bytes themselves; ids 256.. are the special tokens."""

    def __init__(self) -> None:
        self._special_text = {256 + i: text for i, text in enumerate(SPECIAL_TOKENS)}
        self._special_id = {text: token_id for token_id, text in self._special_text.items()}
        # Every token's bytes, built once: streaming asks for them once per token.
        self._token_bytes = [bytes((b,)) for b in range(256)] + [t.encode("utf-8") for t in SPECIAL_TOKENS]
        self.sandbox_family = "byte"  # the grading sandbox rebuilds it by this name instead of calling back

    @property
    def vocab_size(self) -> int:
        return 256 + len(SPECIAL_TOKENS)

    @property
    def eos_token_id(self) -> int:
        return self._special_id["<|endoftext|>"]

    @property
    def all_special_ids(self) -> list[int]:
        return sorted(self._special_text)

    def encode(self, text: str) -> list[int]:
        ids: list[int] = []
        for piece, is_special in split_on_special(text, self._special_id):
            if is_special:
                ids.append(self._special_id[piece])
            else:
                ids.extend(piece.encode("utf-8"))
        return ids

    def encode_ordinary(self, text: str, at_start: bool = True) -> list[int]:
        """``text`` as plain text: its UTF-8 bytes, a special token's text included (tiktoken's name)."""
        return list(text.encode("utf-8"))

    def decode_single_token_bytes(self, token_id: int) -> bytes:
        return self._token_bytes[check_token_id(token_id, len(self._token_bytes))]

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = False) -> str:
        size = self.vocab_size
        for token_id in ids:  # validate everything first: a bad id anywhere is an error
            check_token_id(token_id, size)
        data = bytearray()
        for token_id in ids:
            if token_id < 256:
                data.append(token_id)
            elif not skip_special_tokens:
                data += self._special_text[token_id].encode("utf-8")
        return data.decode("utf-8", errors="replace")

    def convert_ids_to_tokens(self, ids: Sequence[int]) -> list[str]:
        tokens = []
        for token_id in ids:
            check_token_id(token_id, self.vocab_size)
            tokens.append(self._special_text.get(token_id) or f"<0x{token_id:02X}>")
        return tokens
