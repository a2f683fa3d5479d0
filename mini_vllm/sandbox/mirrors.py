"""Objects a test hands to graded code that cross as data: the child rebuilds its own copy.

A test's object may say how to rebuild it (``sandbox_mirror() -> (kind, state)``), when it is plain
data under its methods: a :class:`PieceTokenizer` is its pieces, a Hugging Face tokenizer its JSON.
The child builds its own copy from that state, so calling it costs no round trip, and nothing the
child does to its copy (its attributes, its backend) reaches the trusted side. Nothing that counts
is mirrored: what a test counts is served from the trusted side (:mod:`mini_vllm.sandbox.served`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from mini_vllm.sandbox.policy import MAX_STATE_CHARACTERS
from mini_vllm.tokenizers.piece import PieceTokenizer


def _hf_tokenizer(json_text: str, eos_token: str) -> Any:
    from tokenizers import Tokenizer

    from mini_vllm.tokenizers.hf import HFTokenizer

    return HFTokenizer(Tokenizer.from_str(json_text), eos_token=eos_token)


def _hf(state: Any) -> Any:
    if not (isinstance(state, list) and len(state) == 2 and all(isinstance(s, str) for s in state)
            and len(state[0]) <= MAX_STATE_CHARACTERS):
        raise TypeError("a Hugging Face tokenizer arrives as its JSON and its EOS token")
    return _hf_tokenizer(state[0], state[1])


def _pieces(state: Any) -> PieceTokenizer:
    if not (isinstance(state, list) and all(isinstance(p, bytes) for p in state)):
        raise TypeError("a piece tokenizer arrives as its pieces")
    return PieceTokenizer([bytes(p) for p in state])


# kind -> builds the child's copy from the state
BUILDERS: dict[str, Callable[[Any], Any]] = {"pieces": _pieces, "hf-tokenizer": _hf}
