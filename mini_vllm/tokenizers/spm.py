"""A Llama-style SentencePiece BPE tokenizer in plain Python (the ``spm`` family).

It reads a Hugging Face ``tokenizer.json`` built the way Llama 2 and Mistral files are,
and shares the merge loop and the protocol with :mod:`mini_vllm.tokenizers.bpe`. What
differs from byte-level BPE:

- **Spaces are ``▁``.** Every space becomes ``▁`` (U+2581) and is glued to the word
  after it; the first word of the text gets a ``▁`` of its own (``prepend_scheme="first"``).
- **Characters, not bytes, are merged.** A character missing from the vocabulary is
  spelled by its UTF-8 bytes as byte tokens ``<0x00>`` .. ``<0xFF>`` (*byte fallback*).
- **Decoding is a chain:** ``▁`` -> space, each run of byte tokens -> its UTF-8 text
  (one U+FFFD *per byte* when the run as a whole is not valid UTF-8), join, and strip
  one leading space from the result.

``decode_single_token_bytes`` gives the raw bytes a token stands for, in every family:
``▁Hello`` -> ``b" Hello"``, ``<0xE5>`` -> ``b"\\xe5"``. That differs from ``decode([id])``
in exactly two ways: ``decode`` strips the first space (``decode([▁Hello]) == "Hello"``),
and a byte token that is not a whole character decodes to U+FFFD.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from mini_vllm.tokenizers.base import REPLACEMENT_CHAR
from mini_vllm.tokenizers.bpe import BPEFile, MergeTokenizer

SHIPPED_SPM_TOKENIZER = Path(__file__).resolve().parent.parent / "data" / "spm_tokenizer.json"
METASPACE = "\u2581"  # ▁
BYTE_TOKEN = re.compile(r"<0x([0-9A-F]{2})>")
# Metaspace splitting: each ▁ starts a new word (SentencePiece's "merged with next").
METASPACE_WORD = re.compile(f"{METASPACE}[^{METASPACE}]*|[^{METASPACE}]+")


class SentencePieceBPETokenizer(MergeTokenizer):
    """SentencePiece-style BPE with byte fallback, loaded from a Hugging Face ``tokenizer.json``."""

    def __init__(self, vocab: dict[str, int], merges: list[tuple[str, str]], special_tokens: dict[str, int],
                 eos_token: str = "<|endoftext|>") -> None:
        super().__init__(vocab, merges, special_tokens, eos_token)
        # token id -> its byte value, for the <0xNN> tokens: decode handles their runs apart.
        self._byte_value = {i: self._token_bytes[i][0] for i, t in self._tokens.items() if BYTE_TOKEN.fullmatch(t)}
        if len(self._byte_value) != 256:
            raise ValueError(f"a byte-fallback vocabulary needs all 256 <0xNN> tokens, found {len(self._byte_value)}")

    @classmethod
    def from_file(cls, path: str | Path = SHIPPED_SPM_TOKENIZER) -> SentencePieceBPETokenizer:
        """Load a Metaspace + byte-fallback ``tokenizer.json`` (the course ships one; see ``data/``)."""
        spec = BPEFile.read(path)
        if not spec.spec["model"].get("byte_fallback"):
            raise ValueError(f"{path}: expected a BPE model with byte_fallback")
        tokenizer = cls(spec.vocab, spec.merges, spec.special_tokens)
        if Path(path) == Path(SHIPPED_SPM_TOKENIZER):  # the shipped file: the grading sandbox can rebuild it by name
            tokenizer.sandbox_family = "spm"  # type: ignore[attr-defined]
        return tokenizer

    def _words(self, text: str, at_start: bool) -> list[str]:
        text = text.replace(" ", METASPACE)
        if at_start and not text.startswith(METASPACE):
            text = METASPACE + text  # only the start of the whole text gets the extra ▁
        return METASPACE_WORD.findall(text)

    def _initial_pieces(self, word: str) -> list[str]:
        # A character outside the vocabulary becomes its bytes, one token each.
        pieces: list[str] = []
        for char in word:
            if char in self._token_id:
                pieces.append(char)
            else:
                pieces.extend(f"<0x{byte:02X}>" for byte in char.encode("utf-8"))
        return pieces

    def _bytes_of(self, token: str) -> bytes:
        return metaspace_token_bytes(token)

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = False) -> str:
        pieces: list[str] = []
        run = bytearray()  # consecutive byte tokens, decoded together
        for token_id in self._visible_ids(ids, skip_special_tokens):
            if token_id in self._byte_value:
                run.append(self._byte_value[token_id])
                continue
            pieces.append(_decode_byte_run(run))
            run.clear()
            pieces.append(self._token_bytes[token_id].decode("utf-8"))
        pieces.append(_decode_byte_run(run))
        return "".join(pieces).removeprefix(" ")  # the Strip decoder: one leading space


def metaspace_token_bytes(token: str) -> bytes:
    """The raw bytes an ordinary token of this family stands for: ``<0xE5>`` -> ``b"\\xe5"``, ``▁Hi`` -> ``b" Hi"``."""
    byte = BYTE_TOKEN.fullmatch(token)
    if byte:
        return bytes((int(byte.group(1), 16),))
    return token.replace(METASPACE, " ").encode("utf-8")


def _decode_byte_run(run: bytearray) -> str:
    """Hugging Face's ByteFallback rule: the run's text if it is valid UTF-8, else one U+FFFD per byte.

    Note that one bad byte spoils the whole run, valid characters before it included.
    """
    try:
        return run.decode("utf-8")
    except UnicodeDecodeError:
        return REPLACEMENT_CHAR * len(run)
