"""Real vocabularies of released models: the ``mistral`` and ``tekken`` families.

Both files ship inside the ``mistral-common`` wheel (Apache-2.0), so nothing is downloaded:

- ``mistral``: ``data/tokenizer.model.v1``, the SentencePiece model of Mistral 7B v0.1
  (32,000 pieces, ``▁`` for spaces, all 256 ``<0xNN>`` byte-fallback pieces), run by
  Google's ``sentencepiece`` through mistral-common's ``SentencePieceTokenizer``;
- ``tekken``: ``data/tekken_240911.json``, Tekken, the tiktoken-style byte-level BPE of
  Mistral NeMo and later (131,072 ids, the first 1,000 of them special), run by
  ``tiktoken`` through mistral-common's ``Tekkenizer``.

These are thin adapters to the course's tokenizer protocol: encoding and decoding are the
vendor library's own. The adapters add only what the protocol asks and the libraries do not
offer: id checks with the course's ``ValueError``, special tokens written in the text (the way a
chat template reaches a model), and the raw bytes of one token where the library has no call
for it (see each ``decode_single_token_bytes``).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from itertools import groupby
from pathlib import Path
from typing import cast

import mistral_common
from mistral_common.tokens.tokenizers.base import SpecialTokenPolicy
from mistral_common.tokens.tokenizers.sentencepiece import SentencePieceTokenizer
from mistral_common.tokens.tokenizers.tekken import Tekkenizer
from sentencepiece import SentencePieceProcessor, sentencepiece_model_pb2

from mini_vllm.tokenizers.base import check_token_id, split_on_special
from mini_vllm.tokenizers.bpe import byte_to_unicode
from mini_vllm.tokenizers.spm import METASPACE, metaspace_token_bytes

WHEEL_DATA = Path(mistral_common.__file__).resolve().parent / "data"
MISTRAL_7B_V01 = WHEEL_DATA / "tokenizer.model.v1"
TEKKEN_240911 = WHEEL_DATA / "tekken_240911.json"
# (mypy reads the members of mistral-common's StrEnum as `auto`, hence the casts.)
KEEP_SPECIALS = cast(SpecialTokenPolicy, SpecialTokenPolicy.KEEP)
SKIP_SPECIALS = cast(SpecialTokenPolicy, SpecialTokenPolicy.IGNORE)


class _VendorTokenizer:
    """What both adapters share: the special tokens, the id checks, encoding around special tokens."""

    def __init__(self, special_id: dict[str, int], vocab_size: int, eos_token_id: int) -> None:
        self._special_id = special_id
        self._special_texts = frozenset(special_id)  # one object, so its hash is computed once
        self._special_ids = frozenset(special_id.values())
        self._vocab_size = vocab_size
        self._eos_token_id = eos_token_id

    @property
    def vocab_size(self) -> int:
        return self._vocab_size

    @property
    def eos_token_id(self) -> int:
        return self._eos_token_id

    @property
    def all_special_ids(self) -> list[int]:
        return sorted(self._special_ids)

    def encode(self, text: str) -> list[int]:
        # The vendor libraries encode plain text only; a special token written in the text (how a
        # chat template reaches a model) is matched first, as Hugging Face's added tokens are.
        ids: list[int] = []
        for index, (piece, is_special) in enumerate(split_on_special(text, self._special_texts)):
            if is_special:
                ids.append(self._special_id[piece])
            else:
                ids.extend(self._encode_plain(piece, at_start=index == 0))
        return ids

    def encode_ordinary(self, text: str, at_start: bool = True) -> list[int]:
        """``text`` as plain text, by the vendor library alone: no special token is matched (tiktoken's name).
        ``at_start``: the text starts a prompt (SentencePiece's dummy prefix ``▁``; Tekken has no such rule)."""
        return self._encode_plain(text, at_start) if text else []

    def _encode_plain(self, text: str, at_start: bool) -> list[int]:
        raise NotImplementedError

    def _checked(self, ids: Sequence[int]) -> list[int]:
        return [check_token_id(token_id, self._vocab_size) for token_id in ids]


class MistralTokenizer(_VendorTokenizer):
    """Mistral 7B v0.1's SentencePiece model, decoded by ``sentencepiece`` itself.

    Its special tokens are ``<unk>`` (0), ``<s>`` (1) and ``</s>`` (2, the EOS).
    """

    def __init__(self, path: str | Path = MISTRAL_7B_V01) -> None:
        self.vendor = SentencePieceTokenizer(path)
        self._pieces = self.vendor.vocab()
        # The library's special ids are its control tokens (<s>, </s>); <unk> is one too, as in
        # Hugging Face's copy of this tokenizer (SentencePiece would decode it as " ⁇ ").
        special = {self._pieces[i]: i for i in (*self.vendor.special_ids, self.vendor.unk_id)}
        super().__init__(special, self.vendor.n_words, self.vendor.eos_id)
        # SentencePiece writes a "dummy prefix" ▁ before every text it encodes. Like Hugging Face's
        # Metaspace(prepend_scheme="first") and transformers' LlamaTokenizer(legacy=False), only the
        # start of the whole text gets it: text after a special token continues a sentence. So the
        # text after a special token is encoded by a second processor, loaded from the same file
        # with that one normalizer switch off (transformers does the same).
        proto = sentencepiece_model_pb2.ModelProto.FromString(Path(path).read_bytes())  # type: ignore[attr-defined]
        proto.normalizer_spec.add_dummy_prefix = False
        self._continuing = SentencePieceProcessor(model_proto=proto.SerializeToString())
        self._space_id = self._pieces.index(METASPACE)  # the lone ▁ piece, used by decode below
        # The raw bytes of one token, read off the library's own vocabulary: a piece <0xNN> stands
        # for the byte NN, any other piece for its text with ▁ as a space (that is what
        # SentencePiece's byte fallback and whitespace escaping mean); a special token for its text.
        self._token_bytes = [piece.encode("utf-8") if i in self._special_ids else metaspace_token_bytes(piece)
                             for i, piece in enumerate(self._pieces)]

    def _encode_plain(self, text: str, at_start: bool) -> list[int]:
        if at_start:
            return self.vendor.encode(text, bos=False, eos=False)
        return list(self._continuing.encode(text))

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = False) -> str:
        ids = self._checked(ids)
        if skip_special_tokens:
            return self.vendor.decode([i for i in ids if i not in self._special_ids])
        # SentencePiece drops control tokens when it decodes, so the special tokens are written
        # here, between runs of ordinary ids that the library decodes. The library strips one
        # leading space from whatever it decodes, as if each call started a text; a run after a
        # special token does not, so it goes in behind a lone ▁ that takes the strip.
        parts: list[str] = []
        for is_special, group in groupby(ids, key=self._special_ids.__contains__):
            run = list(group)
            if is_special:
                parts.extend(self._pieces[i] for i in run)
            else:
                parts.append(self.vendor.decode([self._space_id, *run] if parts else run))
        return "".join(parts)

    def decode_single_token_bytes(self, token_id: int) -> bytes:
        return self._token_bytes[check_token_id(token_id, self._vocab_size)]

    def convert_ids_to_tokens(self, ids: Sequence[int]) -> list[str]:
        return [self.vendor.id_to_piece(i) for i in self._checked(ids)]


class TekkenTokenizer(_VendorTokenizer):
    """Tekken (Mistral NeMo and later): byte-level BPE run by ``tiktoken``, 1,000 special ids first."""

    def __init__(self, path: str | Path = TEKKEN_240911) -> None:
        self.vendor = Tekkenizer.from_file(path)
        special = {self.vendor.id_to_piece(i): i for i in self.vendor.special_ids}
        super().__init__(special, self.vendor.n_words, self.vendor.eos_id)
        self._byte_char = byte_to_unicode()

    def _encode_plain(self, text: str, at_start: bool) -> list[int]:
        return self.vendor.encode(text, bos=False, eos=False)  # byte-level: no start-of-text rule

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = False) -> str:
        policy = SKIP_SPECIALS if skip_special_tokens else KEEP_SPECIALS
        return self.vendor.decode(self._checked(ids), special_token_policy=policy)

    def decode_single_token_bytes(self, token_id: int) -> bytes:
        # The library has this call (tiktoken's decode_single_token_bytes, behind the special ids).
        return self.vendor.id_to_byte_piece(check_token_id(token_id, self._vocab_size), KEEP_SPECIALS)

    def convert_ids_to_tokens(self, ids: Sequence[int]) -> list[str]:
        # Tekken's vocabulary holds bytes, not strings. Hugging Face's copy of it (Mistral NeMo's
        # tokenizer.json) spells each token's bytes with the GPT-2 byte map ("Ġ" for a space), so
        # every token, even part of a character, has a distinct printable name; so does this.
        return [self.vendor.id_to_piece(i) if i in self._special_ids
                else "".join(self._byte_char[b] for b in self.decode_single_token_bytes(i)) for i in self._checked(ids)]


@cache
def load_mistral() -> MistralTokenizer:
    """Mistral 7B v0.1's tokenizer, loaded once per process."""
    return MistralTokenizer()


@cache
def load_tekken() -> TekkenTokenizer:
    """Tekken, loaded once per process (131,072 ids: about half a second)."""
    return TekkenTokenizer()
