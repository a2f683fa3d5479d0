"""How a token mask reads in a failure message (lab-08's and lab-09's tests): its size, its first tokens, and
how two masks differ. Formatting only: what is right comes from the tests' oracles, never from here."""

from __future__ import annotations

from collections.abc import Sequence

from mini_vllm.labtypes.lab08 import Vocabulary


def tokens(count: int) -> str:
    return f"{count} token{'' if count == 1 else 's'}"


def mask_text(mask: Sequence[int], vocab: Vocabulary, limit: int = 3) -> str:
    """A mask in a table cell: its size and its first few tokens."""
    shown = ", ".join("EOS" if i == vocab.eos_token_id else repr(vocab.tokens[i])[1:] for i in list(mask)[:limit])
    return f"{tokens(len(mask))}: {shown}{', …' if len(mask) > limit else ''}"


def mask_difference(mine: Sequence[int], want: Sequence[int], vocab: Vocabulary) -> str:
    """What ``mine`` allows that ``want`` refuses, and the other way round (the first few of each)."""
    extra, missing = sorted(set(mine) - set(want)), sorted(set(want) - set(mine))

    def names(ids: list[int]) -> str:
        return ", ".join("EOS" if i == vocab.eos_token_id else f"{i} {vocab.tokens[i]!r}" for i in ids[:6]) + (
            " …" if len(ids) > 6 else "")
    return (f"you allow {tokens(len(extra))} it refuses ({names(extra)}); " if extra else "") + (
        f"you refuse {tokens(len(missing))} it allows ({names(missing)})" if missing else "")
