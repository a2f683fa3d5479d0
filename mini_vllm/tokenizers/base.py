"""What every tokenizer in the course looks like from the outside.

The labs are written against this small protocol, with the method names Hugging Face
and tiktoken use, so the same lab code runs on mini_vllm's tokenizers and on a real
``tokenizers.Tokenizer`` (through :class:`mini_vllm.tokenizers.hf.HFTokenizer`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from functools import lru_cache
from typing import Protocol, runtime_checkable

REPLACEMENT_CHAR = "\ufffd"


@runtime_checkable
class Tokenizer(Protocol):
    """The tokenizer surface the labs may use."""

    @property
    def vocab_size(self) -> int: ...

    @property
    def eos_token_id(self) -> int: ...

    @property
    def all_special_ids(self) -> list[int]: ...

    def encode(self, text: str) -> list[int]: ...

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = False) -> str:
        """Text for ``ids``. Bytes that do not form valid UTF-8 become U+FFFD."""
        ...

    def decode_single_token_bytes(self, token_id: int) -> bytes:
        """The raw bytes one token stands for (may be part of a character).

        The same idea in every family, and not the same as ``decode([token_id])``: a token
        that is part of a character decodes to U+FFFD, and a SentencePiece decoder strips
        the first space of what it decodes (``▁Hello`` stands for ``b" Hello"`` but
        decodes alone to ``"Hello"``).
        """
        ...

    def convert_ids_to_tokens(self, ids: Sequence[int]) -> list[str]: ...


@runtime_checkable
class OrdinaryEncoder(Tokenizer, Protocol):
    """A tokenizer that can also encode text as text: every family ``load_tokenizer`` gives (lab-10).

    ``encode`` matches special-token strings written in its input (how a chat template rendered to text
    reaches a model); ``encode_ordinary`` never does (tiktoken's name; Hugging Face's
    ``encode_special_tokens=True``). ``at_start`` says whether the text starts the prompt: a SentencePiece
    family then writes its dummy prefix ``▁``, as its own ``encode`` does at the start of a text.
    """

    def encode_ordinary(self, text: str, at_start: bool = True) -> list[int]: ...

    def __hash__(self) -> int: ...  # hashable by identity, as every family is: a cache may key on the tokenizer


def check_token_id(token_id: object, vocab_size: int) -> int:
    """Return ``token_id`` if it names a token, else raise ``ValueError`` naming it.

    ``bool`` is rejected although it is an ``int`` subclass: ``True`` as a token id
    is always a bug upstream, never a request for token 1.
    """
    if type(token_id) is int and 0 <= token_id < vocab_size:
        return token_id  # the common case, checked first: this runs once per streamed token
    if isinstance(token_id, bool) or not isinstance(token_id, int):
        raise ValueError(f"token id {token_id!r} is not an int (got {type(token_id).__name__})")
    if not 0 <= token_id < vocab_size:
        raise ValueError(f"token id {token_id} is outside the vocabulary (0..{vocab_size - 1})")
    return token_id


def split_on_special(text: str, specials: Iterable[str]) -> list[tuple[str, bool]]:
    """Cut ``text`` into ``(piece, is_special)`` runs.

    Like Hugging Face's added-token matching, a special token written in the input
    text is recognised as that token (this is how chat templates reach the model).
    Longer specials are tried first, so one that contains another wins.
    """
    pattern = _special_pattern(frozenset(specials))
    if pattern is None:
        return [(text, False)] if text else []
    # re.split with one capture group alternates plain, special, plain, special, ...
    parts = pattern.split(text)
    return [(part, index % 2 == 1) for index, part in enumerate(parts) if part]


@lru_cache(maxsize=16)
def _special_pattern(specials: frozenset[str]) -> re.Pattern[str] | None:
    """The pattern that finds ``specials``, built once per set (Tekken has 1,000: building it takes 2 ms)."""
    ordered = sorted(specials, key=len, reverse=True)
    return re.compile("(" + "|".join(map(re.escape, ordered)) + ")") if ordered else None


def encode_continuation(tokenizer: Tokenizer, text: str) -> list[int]:
    """Token ids for ``text`` that continues earlier text (a model's reply after its prompt).

    ``encode`` treats its input as the start of a text, and a SentencePiece tokenizer gives
    the first word of a text a ``▁`` of its own: after a prompt that would decode as an
    extra space. Encoding the text right after a special token (which ends the "start of
    text" position) and dropping that token gives the ids a model would generate. For the
    byte-level families this changes nothing.
    """
    marker = tokenizer.convert_ids_to_tokens([tokenizer.eos_token_id])[0]
    ids = tokenizer.encode(marker + text)
    assert ids[0] == tokenizer.eos_token_id, f"{marker!r} did not encode as its special token"
    return ids[1:]
