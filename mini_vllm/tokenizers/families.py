"""One door to every tokenizer family: ``load_tokenizer("byte" | "bpe" | "spm" | "mistral" | "tekken")``."""

from __future__ import annotations

import functools
from collections.abc import Callable

from mini_vllm.tokenizers.base import Tokenizer
from mini_vllm.tokenizers.bpe import BPETokenizer
from mini_vllm.tokenizers.byte import ByteTokenizer
from mini_vllm.tokenizers.spm import SentencePieceBPETokenizer


def _mistral() -> Tokenizer:
    from mini_vllm.tokenizers.mistral import load_mistral  # importing mistral-common takes a second: only on demand

    return load_mistral()


def _tekken() -> Tokenizer:
    from mini_vllm.tokenizers.mistral import load_tekken

    return load_tekken()


_LOADERS: dict[str, Callable[[], Tokenizer]] = {
    "byte": ByteTokenizer,  # one token per UTF-8 byte
    "bpe": BPETokenizer.from_file,  # GPT-2 style byte-level BPE (data/tokenizer.json)
    "spm": SentencePieceBPETokenizer.from_file,  # Llama-style SentencePiece BPE (data/spm_tokenizer.json)
    # Real models' vocabularies from the mistral-common wheel, loaded once per process (they are big).
    "mistral": _mistral,  # Mistral 7B v0.1: SentencePiece, <0xNN> byte fallback, 32,000 pieces
    "tekken": _tekken,  # Tekken (Mistral NeMo): tiktoken-style byte-level BPE, 131,072 ids
}
TOKENIZER_FAMILIES: tuple[str, ...] = tuple(_LOADERS)


@functools.cache
def load_tokenizer_cached(name: str) -> Tokenizer:
    """One shared tokenizer per family in this process (the grading child rebuilds tokenizers by name)."""
    return load_tokenizer(name)


def load_tokenizer(name: str) -> Tokenizer:
    """The tokenizer of family ``name``: ``"byte"``, ``"bpe"``, ``"spm"``, or a real ``"mistral"``, ``"tekken"``."""
    if name not in _LOADERS:
        raise ValueError(f"unknown tokenizer {name!r}: choose one of {', '.join(TOKENIZER_FAMILIES)}")
    tokenizer = _LOADERS[name]()
    if name in ("mistral", "tekken"):
        tokenizer.sandbox_family = name  # type: ignore[attr-defined]
    return tokenizer
