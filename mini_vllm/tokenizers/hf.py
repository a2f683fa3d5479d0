"""Bridges to Hugging Face ``tokenizers``: the real library the course checks itself against.

- :func:`hf_byte_tokenizer` builds a ``tokenizers.Tokenizer`` with the same ids as
  :class:`~mini_vllm.tokenizers.byte.ByteTokenizer` (so ``DecodeStream`` can run on
  the exact byte stream the labs see);
- :func:`hf_bpe_tokenizer` loads the shipped ``tokenizer.json`` with the real library,
  :func:`hf_spm_tokenizer` the shipped SentencePiece-style ``spm_tokenizer.json``;
- :func:`hf_mistral_tokenizer` converts the wheel's Mistral 7B SentencePiece model (an oracle
  for encode and decode), :func:`hf_tekken_tokenizer` rebuilds Tekken for decoding only
  (an oracle for decode, and ``DecodeStream`` on the same ids);
- :class:`HFTokenizer` wraps the shipped ones in the course's tokenizer protocol.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from pathlib import Path

from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers, pre_tokenizers

from mini_vllm.tokenizers.base import check_token_id
from mini_vllm.tokenizers.bpe import SHIPPED_TOKENIZER, byte_to_unicode
from mini_vllm.tokenizers.byte import SPECIAL_TOKENS
from mini_vllm.tokenizers.spm import SHIPPED_SPM_TOKENIZER, metaspace_token_bytes

_ONLY_INT = frozenset({int})  # the types a token id may have (not bool, not a float, not numpy's ints)


def hf_byte_tokenizer() -> Tokenizer:
    """A real ``tokenizers.Tokenizer`` whose ids match ``ByteTokenizer``'s: byte b is id b."""
    vocab = {char: byte for byte, char in byte_to_unicode().items()}
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.add_special_tokens([AddedToken(text, special=True) for text in SPECIAL_TOKENS])
    return tokenizer


def hf_bpe_tokenizer(path: str | Path = SHIPPED_TOKENIZER) -> Tokenizer:
    """The shipped BPE tokenizer, loaded by the real library."""
    return Tokenizer.from_file(str(path))


def hf_spm_tokenizer(path: str | Path = SHIPPED_SPM_TOKENIZER) -> Tokenizer:
    """The shipped SentencePiece-style tokenizer (Metaspace, byte fallback), loaded by the real library."""
    return Tokenizer.from_file(str(path))


@cache
def hf_mistral_tokenizer() -> Tokenizer:
    """Mistral 7B v0.1's SentencePiece model converted to a ``tokenizers.Tokenizer``, the way transformers does.

    The pieces keep their ids; the merges are read off the vocabulary (every split of a piece into
    two pieces, ranked by the piece's score, as transformers' SentencePiece converter does); the
    normalizer writes ▁ for spaces and before the text, and the decoder chain is Hugging Face's for
    Llama-style files (▁ -> space, <0xNN> byte fallback, fuse, strip one leading space). On text
    without special tokens it encodes as sentencepiece does. After a special token it writes a ▁
    (Hugging Face's "legacy" rule), where the course's adapter continues the sentence without one.
    """
    from sentencepiece import SentencePieceProcessor

    from mini_vllm.tokenizers.mistral import MISTRAL_7B_V01, load_mistral  # mistral-common is slow to import

    vendor = load_mistral()
    model = SentencePieceProcessor(model_file=str(MISTRAL_7B_V01))
    pieces = vendor.convert_ids_to_tokens(range(vendor.vocab_size))
    vocab = {piece: i for i, piece in enumerate(pieces)}
    ranked: list[tuple[float, int, int, tuple[str, str]]] = []
    for piece, i in vocab.items():
        for cut in range(1, len(piece)):
            left, right = piece[:cut], piece[cut:]
            if left in vocab and right in vocab:
                ranked.append((-model.GetScore(i), vocab[left], vocab[right], (left, right)))
    merges = [pair for *_, pair in sorted(ranked)]
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=merges, unk_token="<unk>", fuse_unk=True,
                                     byte_fallback=True))
    tokenizer.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    tokenizer.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(),
                                           decoders.Fuse(), decoders.Strip(" ", 1, 0)])
    tokenizer.add_special_tokens([AddedToken(pieces[i], special=True) for i in vendor.all_special_ids])
    return tokenizer


@cache
def hf_tekken_tokenizer() -> Tokenizer:
    """Tekken's vocabulary as a byte-level ``tokenizers.Tokenizer``, as in Mistral NeMo's ``tokenizer.json``.

    Each token's bytes are spelled with the GPT-2 byte map under the same id, the 1,000 special
    tokens come first, and the decoder is ByteLevel. Built for decoding only (no merges).
    """
    from mini_vllm.tokenizers.mistral import load_tekken

    vendor = load_tekken()
    tokens = vendor.convert_ids_to_tokens(range(vendor.vocab_size))  # specials as text, the rest GPT-2 spelled
    tokenizer = Tokenizer(models.BPE(vocab={token: i for i, token in enumerate(tokens)}, merges=[]))
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.add_special_tokens([AddedToken(tokens[i], special=True) for i in vendor.all_special_ids])
    return tokenizer


class HFTokenizer:
    """The course's tokenizer protocol on top of a ``tokenizers.Tokenizer``."""

    def __init__(self, tokenizer: Tokenizer, eos_token: str = "<|endoftext|>") -> None:
        self.backend = tokenizer
        self._eos_token = eos_token
        self._vocab_size = tokenizer.get_vocab_size(with_added_tokens=True)
        self._token_ids = frozenset(range(self._vocab_size))  # decode's check in C (Tekken's 131k: about 8 MB)
        special = {t.content: i for i, t in tokenizer.get_added_tokens_decoder().items() if t.special}
        self._special_ids = sorted(special.values())
        self._special_bytes = {i: text.encode("utf-8") for text, i in special.items()}
        self._eos_token_id = special[eos_token]
        self._byte_of_char = {char: byte for byte, char in byte_to_unicode().items()}
        # Which family spells the tokens: Metaspace (▁ and <0xNN>) or the GPT-2 byte map.
        self._metaspace = isinstance(tokenizer.pre_tokenizer, pre_tokenizers.Metaspace)

    @property
    def vocab_size(self) -> int:
        return self._vocab_size

    @property
    def eos_token_id(self) -> int:
        return self._eos_token_id

    @property
    def all_special_ids(self) -> list[int]:
        return list(self._special_ids)

    def encode(self, text: str) -> list[int]:
        return self.backend.encode(text, add_special_tokens=False).ids

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = False) -> str:
        # The real library silently skips unknown ids (and reads True as 1); we refuse them. A streaming
        # detokenizer calls this once per token with a window of ids, so the usual case is checked in C:
        # every id one of the vocabulary's (set lookups: 2.0 and True pass them) and exactly an int. Anything
        # else gets the id-by-id check, which raises naming the first bad id.
        ids = ids if type(ids) is list else list(ids)
        try:
            usual = self._token_ids.issuperset(ids) and _ONLY_INT.issuperset(map(type, ids))
        except TypeError:  # an id that cannot be hashed, so it is no int
            usual = False
        if not usual:
            for token_id in ids:
                check_token_id(token_id, self._vocab_size)
        return self.backend.decode(ids, skip_special_tokens)

    def decode_single_token_bytes(self, token_id: int) -> bytes:
        check_token_id(token_id, self._vocab_size)
        if token_id in self._special_bytes:
            return self._special_bytes[token_id]
        token = self.backend.id_to_token(token_id)
        assert token is not None, f"token id {token_id} has no token in the backend vocabulary"
        if self._metaspace:
            return metaspace_token_bytes(token)
        return bytes(self._byte_of_char[char] for char in token)

    def convert_ids_to_tokens(self, ids: Sequence[int]) -> list[str]:
        return [str(self.backend.id_to_token(check_token_id(i, self._vocab_size))) for i in ids]

    def sandbox_mirror(self) -> tuple[str, list[str]]:
        """In the grading sandbox graded code gets its own copy, rebuilt from the JSON: the backend stays here."""
        return "hf-tokenizer", [self.backend.to_str(), self._eos_token]
