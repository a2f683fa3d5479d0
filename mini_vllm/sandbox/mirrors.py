"""Stand-ins the grading child builds for trusted objects that are cheaper to mirror than to call back.

A test's object may say how to mirror it (``sandbox_mirror() -> (kind, state)``): the child then
builds one of the stand-ins below from that state instead of holding a reference whose every
call is a round trip. A stand-in that counts (a counting tokenizer's decodes) reports what it
counted with the child's next message, before the reply of the call that caused it, and the
trusted side adds it to the real object (``sandbox_account``). So the count is kept where the
tests can read it, and is as exact as a call back would make it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from mini_vllm.piece_tokenizer import PieceTokenizer


class Accounts:
    """Counts waiting to go to the trusted side, by the id of the object they belong to."""

    def __init__(self) -> None:
        self.pending: dict[int, dict[str, int]] = {}

    def add(self, object_id: int, counts: dict[str, int]) -> None:
        mine = self.pending.setdefault(object_id, {})
        for name, value in counts.items():
            mine[name] = mine.get(name, 0) + value

    def take(self) -> dict[int, dict[str, int]]:
        pending, self.pending = self.pending, {}
        return pending


class CountingTokenizerMirror:
    """``mini_vllm.testing.tokenizers.CountingTokenizer`` as the child sees it: decode counted and reported."""

    def __init__(self, inner: Any, object_id: int, accounts: Accounts) -> None:
        self.inner = inner
        self.sandbox_home = object_id  # sent back across, it is the trusted side's object again
        self._object_id = object_id
        self._accounts = accounts

    @property
    def vocab_size(self) -> int:
        return int(self.inner.vocab_size)

    @property
    def eos_token_id(self) -> int:
        return int(self.inner.eos_token_id)

    @property
    def all_special_ids(self) -> list[int]:
        return list(self.inner.all_special_ids)

    def encode(self, text: str) -> list[int]:
        return list(self.inner.encode(text))

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = False) -> str:
        self._accounts.add(self._object_id, {"decode_calls": 1, "ids_decoded": len(ids)})
        return str(self.inner.decode(ids, skip_special_tokens=skip_special_tokens))

    def decode_single_token_bytes(self, token_id: int) -> bytes:
        raise AssertionError("this lab is built on tokenizer.decode only: no raw token bytes")

    def convert_ids_to_tokens(self, ids: Sequence[int]) -> list[str]:
        return list(self.inner.convert_ids_to_tokens(ids))


class CountingAutomatonMirror:
    """``mini_vllm.testing.structured.CountingAutomaton`` as the child sees it: steps counted and reported."""

    def __init__(self, automaton: Any, object_id: int, accounts: Accounts) -> None:
        self._automaton = automaton
        self.start = automaton.start
        self.num_states = automaton.num_states
        self.sandbox_home = object_id
        self._object_id = object_id
        self._accounts = accounts

    def step(self, state: int, byte: int) -> int:
        self._accounts.add(self._object_id, {"steps": 1})
        return int(self._automaton.step(state, byte))

    def is_accepting(self, state: int) -> bool:
        return bool(self._automaton.is_accepting(state))


# The str methods a counting string counts (what a stop-string matcher might call on a stop).
COUNTED_STR_METHODS = ("startswith", "endswith", "find", "rfind", "index", "rindex", "count", "__contains__",
                       "__eq__", "partition", "rpartition", "split", "encode", "casefold", "lower", "upper",
                       "strip", "replace")


class CountingStrMirror(str):
    """A test's counting string (lab-05's stops) as the child sees it: a real ``str`` that counts what is read.

    Every slice, index, iteration, concatenation and counted method adds the characters it reads,
    and the count goes back with the next reply to the test's own string object.
    """

    sandbox_home: int
    _accounts: Accounts

    def _read(self, characters: int) -> None:
        self._accounts.add(self.sandbox_home, {"read": characters})

    def __getitem__(self, key: Any) -> str:
        piece = str.__getitem__(self, key)
        self._read(len(piece))
        return piece

    def __iter__(self) -> Any:
        self._read(len(self))
        return str.__iter__(self)

    def __str__(self) -> str:
        self._read(len(self))
        return str.__str__(self)

    def __add__(self, other: str) -> str:
        self._read(len(self))
        return str.__add__(self, other)

    def __radd__(self, other: str) -> str:
        self._read(len(self))
        return str.__add__(other, self)

    __hash__ = str.__hash__


def _counted(name: str) -> Any:
    method = getattr(str, name)

    def counted(self: CountingStrMirror, *args: Any, **kwargs: Any) -> Any:
        self._read(len(self))
        return method(self, *args, **kwargs)

    return counted


for _name in COUNTED_STR_METHODS:
    setattr(CountingStrMirror, _name, _counted(_name))
CountingStrMirror.__hash__ = str.__hash__  # type: ignore[method-assign, assignment]


def _counting_str(text: Any, object_id: int | None, accounts: Accounts) -> CountingStrMirror:
    if not isinstance(text, str):
        raise TypeError("a counting string arrives as its text")
    mirror = CountingStrMirror(text)
    mirror.sandbox_home = object_id or 0
    mirror._accounts = accounts
    return mirror


# kind -> (builds the stand-in from (state, object id, accounts), whether it reports counts)
BUILDERS: dict[str, tuple[Callable[[Any, int | None, Accounts], Any], bool]] = {
    "pieces": (lambda state, _id, _accounts: PieceTokenizer([bytes(p) for p in state]), False),
    "counting-tokenizer": (lambda state, object_id, accounts: CountingTokenizerMirror(state, object_id or 0, accounts),
                           True),
    "counting-automaton": (lambda state, object_id, accounts: CountingAutomatonMirror(state, object_id or 0, accounts),
                           True),
    "counting-str": (_counting_str, True),
}

COUNTING_MIRRORS = (CountingTokenizerMirror, CountingAutomatonMirror, CountingStrMirror)
