"""One door to every tokenizer family the course ships: ``load_tokenizer("byte" | "bpe" | "spm")``."""

from __future__ import annotations

from collections.abc import Callable

from mini_vllm.bpe_tokenizer import BPETokenizer
from mini_vllm.byte_tokenizer import ByteTokenizer
from mini_vllm.spm_tokenizer import SentencePieceBPETokenizer
from mini_vllm.tokenizer_base import Tokenizer

_LOADERS: dict[str, Callable[[], Tokenizer]] = {
    "byte": ByteTokenizer,  # one token per UTF-8 byte
    "bpe": BPETokenizer.from_file,  # GPT-2 style byte-level BPE (data/tokenizer.json)
    "spm": SentencePieceBPETokenizer.from_file,  # Llama-style SentencePiece BPE (data/spm_tokenizer.json)
}
TOKENIZER_FAMILIES: tuple[str, ...] = tuple(_LOADERS)


def load_tokenizer(name: str) -> Tokenizer:
    """The shipped tokenizer of family ``name``: ``"byte"``, ``"bpe"`` or ``"spm"``."""
    if name not in _LOADERS:
        raise ValueError(f"unknown tokenizer {name!r}: choose one of {', '.join(TOKENIZER_FAMILIES)}")
    return _LOADERS[name]()
