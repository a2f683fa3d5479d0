"""A byte-level BPE tokenizer in plain Python that reads a Hugging Face ``tokenizer.json``.

It does what GPT-2 style tokenizers do, in three steps:

1. split the text into special tokens and plain runs, and each plain run into words
   with the GPT-2 regex (so merges never cross a space or a letter/digit boundary);
2. write each word's UTF-8 bytes as printable characters (the GPT-2 byte map), so
   every byte sequence has a spelling in the vocabulary;
3. merge adjacent pieces, always applying the best-ranked merge first, until no merge applies.

Decoding runs the byte map backwards. A token can stand for part of a character,
which is why the streaming labs exist.

:class:`MergeTokenizer` holds what every BPE family shares (the vocabulary, the merge
loop, special tokens, id checks); :class:`BPETokenizer` adds the byte-level parts, and
:mod:`mini_vllm.tokenizers.spm` the SentencePiece ones.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from itertools import pairwise
from pathlib import Path
from typing import Any

import regex

from mini_vllm.tokenizers.base import check_token_id, split_on_special

SHIPPED_TOKENIZER = Path(__file__).resolve().parent.parent / "data" / "tokenizer.json"

# The pre-tokenizer pattern of GPT-2, which Hugging Face's ByteLevel pre-tokenizer uses.
GPT2_SPLIT = regex.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""")


@lru_cache(maxsize=1)
def byte_to_unicode() -> dict[int, str]:
    """GPT-2's map from each byte to a printable character.

    Printable Latin-1 bytes stand for themselves; the other 68 (controls, space,
    soft hyphen, ...) are moved to U+0100 and up, in byte order. That is why a
    leading space shows up as 'Ġ' (byte 0x20 -> U+0120) in GPT-2 vocabularies.
    """
    printable = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAC + 1), *range(0xAE, 0xFF + 1)]
    mapping: dict[int, str] = {}
    moved = 0
    for byte in range(256):
        if byte in printable:
            mapping[byte] = chr(byte)
        else:
            mapping[byte] = chr(256 + moved)
            moved += 1
    return mapping


@dataclass(frozen=True)
class BPEFile:
    """What a Hugging Face ``tokenizer.json`` with a BPE model says, as plain data."""

    vocab: dict[str, int]
    merges: list[tuple[str, str]]
    special_tokens: dict[str, int]
    spec: dict[str, Any]  # the whole file, for the family-specific parts (pre-tokenizer, decoder)

    @classmethod
    def read(cls, path: str | Path) -> BPEFile:
        spec = json.loads(Path(path).read_text(encoding="utf-8"))
        model = spec["model"]
        if model.get("type") != "BPE":
            raise ValueError(f"{path}: expected a BPE model, found {model.get('type')!r}")
        # Older files spell a merge "a b"; newer ones as a two-item list.
        merges = [(m.split(" ", 1)[0], m.split(" ", 1)[1]) if isinstance(m, str) else (m[0], m[1])
                  for m in model["merges"]]
        special = {t["content"]: t["id"] for t in spec.get("added_tokens", []) if t.get("special")}
        return cls(dict(model["vocab"]), merges, special, spec)


class MergeTokenizer:
    """The parts every BPE family shares: vocabulary, ranked merges, special tokens, the protocol.

    A family says how plain text becomes words (:meth:`_words`), how a word becomes its
    first pieces (:meth:`_initial_pieces`), and which bytes a token stands for
    (:meth:`_bytes_of`); merging, caching and id checks are done here once.
    """

    def __init__(self, vocab: dict[str, int], merges: list[tuple[str, str]], special_tokens: dict[str, int],
                 eos_token: str = "<|endoftext|>") -> None:
        self._token_id = dict(vocab)
        self._token_id.update(special_tokens)
        self._tokens = {token_id: token for token, token_id in self._token_id.items()}
        self._merge_rank = {pair: rank for rank, pair in enumerate(merges)}
        self._special_id = dict(special_tokens)
        self._eos_token = eos_token
        self._vocab_size = max(self._tokens) + 1
        # Every token's bytes, computed once: streaming asks for them once per token.
        self._token_bytes = {
            token_id: token.encode("utf-8") if token in self._special_id else self._bytes_of(token)
            for token_id, token in self._tokens.items()
        }
        self._word_cache: dict[str, list[int]] = {}

    # ------------------------------------------------------------------ family hooks

    def _words(self, text: str, at_start: bool) -> list[str]:
        """Split a run of plain text (no special tokens) into the words merges stay inside."""
        raise NotImplementedError

    def _initial_pieces(self, word: str) -> list[str]:
        """A word as vocabulary entries before any merge."""
        raise NotImplementedError

    def _bytes_of(self, token: str) -> bytes:
        """The raw bytes an ordinary (non-special) token stands for."""
        raise NotImplementedError

    # ------------------------------------------------------------------ shared

    @property
    def vocab_size(self) -> int:
        return self._vocab_size

    @property
    def eos_token_id(self) -> int:
        return self._special_id[self._eos_token]

    @property
    def all_special_ids(self) -> list[int]:
        return sorted(self._special_id.values())

    def encode(self, text: str) -> list[int]:
        ids: list[int] = []
        for index, (piece, is_special) in enumerate(split_on_special(text, self._special_id)):
            if is_special:
                ids.append(self._special_id[piece])
                continue
            ids.extend(self.encode_ordinary(piece, at_start=index == 0))
        return ids

    def encode_ordinary(self, text: str, at_start: bool = True) -> list[int]:
        """``text`` as plain text: no special token is matched (tiktoken's name; Hugging Face's
        ``encode_special_tokens=True``). ``at_start``: the text starts a prompt (SentencePiece's extra ``▁``)."""
        ids: list[int] = []
        for word in self._words(text, at_start=at_start) if text else ():  # no text: no dummy prefix either
            cached = self._word_cache.get(word)
            if cached is None:
                cached = [self._token_id[p] for p in apply_merges(self._initial_pieces(word), self._merge_rank)]
                self._word_cache[word] = cached
            ids.extend(cached)
        return ids

    def decode_single_token_bytes(self, token_id: int) -> bytes:
        return self._token_bytes[check_token_id(token_id, self._vocab_size)]

    def _visible_ids(self, ids: Sequence[int], skip_special_tokens: bool) -> list[int]:
        """``ids`` checked (a bad id anywhere is an error), minus the specials when asked to skip them."""
        size = self._vocab_size
        for token_id in ids:
            check_token_id(token_id, size)
        if not skip_special_tokens:
            return list(ids)
        skip = set(self._special_id.values())
        return [token_id for token_id in ids if token_id not in skip]

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = False) -> str:
        data = b"".join(self._token_bytes[token_id] for token_id in self._visible_ids(ids, skip_special_tokens))
        return data.decode("utf-8", errors="replace")

    def convert_ids_to_tokens(self, ids: Sequence[int]) -> list[str]:
        return [self._tokens[check_token_id(token_id, self._vocab_size)] for token_id in ids]


def apply_merges(pieces: list[str], merge_rank: dict[tuple[str, str], int]) -> list[str]:
    """Apply the best-ranked merge everywhere it occurs, repeatedly, until none applies.

    (Hugging Face merges one occurrence at a time, leftmost first; the result is the
    same, because a pair made by a merge always ranks after the merge that made it.)
    """
    while len(pieces) > 1:
        best = min(pairwise(pieces), key=lambda pair: merge_rank.get(pair, len(merge_rank)))
        if best not in merge_rank:
            break
        merged: list[str] = []
        i = 0
        while i < len(pieces):
            if i + 1 < len(pieces) and (pieces[i], pieces[i + 1]) == best:
                merged.append(pieces[i] + pieces[i + 1])
                i += 2
            else:
                merged.append(pieces[i])
                i += 1
        pieces = merged
    return pieces


class BPETokenizer(MergeTokenizer):
    """Byte-level BPE with ranked merges, loaded from a Hugging Face ``tokenizer.json``."""

    def __init__(self, vocab: dict[str, int], merges: list[tuple[str, str]], special_tokens: dict[str, int],
                 eos_token: str = "<|endoftext|>") -> None:
        self._unicode_to_byte = {char: byte for byte, char in byte_to_unicode().items()}
        super().__init__(vocab, merges, special_tokens, eos_token)

    @classmethod
    def from_file(cls, path: str | Path = SHIPPED_TOKENIZER) -> BPETokenizer:
        """Load a byte-level BPE ``tokenizer.json`` (the course ships one; see ``data/``)."""
        spec = BPEFile.read(path)
        tokenizer = cls(spec.vocab, spec.merges, spec.special_tokens)
        if Path(path) == Path(SHIPPED_TOKENIZER):  # the shipped file: the grading sandbox can rebuild it by name
            tokenizer.sandbox_family = "bpe"  # type: ignore[attr-defined]
        return tokenizer

    def _words(self, text: str, at_start: bool) -> list[str]:
        return list(GPT2_SPLIT.findall(text))

    def _initial_pieces(self, word: str) -> list[str]:
        byte_map = byte_to_unicode()
        return [byte_map[b] for b in word.encode("utf-8")]

    def _bytes_of(self, token: str) -> bytes:
        return bytes(self._unicode_to_byte[char] for char in token)
