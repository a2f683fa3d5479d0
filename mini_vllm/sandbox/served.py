"""Declared interfaces: how a test's object is served to graded code, and all graded code may ask of it.

A test's object that counts work (lab-04's counting tokenizer, lab-08's counting automaton, lab-05's
counting stops) never crosses into the child. It stays in the trusted process, and the child gets a
stand-in built from :data:`INTERFACES`: a few plain facts (a vocabulary's size, an automaton's start)
and, for each declared method, a call that goes back to the trusted side, where it is checked,
served and counted. So what a test reads off the object was counted where graded code cannot reach:
nothing counted in the child is believed.

Each method declares its arguments: their type, and how large they may be. The stand-in draws what it
is given into plain values first (an iterator is drawn to its bound, never sent as an iterator), and
the trusted side checks them again before it runs anything (the stand-in lives in the child, so it
is the student's too). No attribute of a served object is reachable, and what a served method
returns is plain data, so nothing leads further into the trusted side. Every argument is bounded,
so a served call is bounded work; and the trusted side serves it under what is left of the CPU budget
of the graded call that made it (an alarm stops a request that would outlast it, and the call fails),
and under a bound on what it serves in one test (:data:`mini_vllm.sandbox.policy.SERVED_PER_TEST_S`).
"""

from __future__ import annotations

import hashlib
import itertools
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from mini_vllm.sandbox.policy import MAX_IDS, MAX_STATE, MAX_TEXT


@dataclass(frozen=True)
class Arg:
    """One declared argument: ``kind`` is ``int``, ``bool``, ``str``, ``ids`` (a list of ints) or ``key``
    (an int, or a slice sent as ``[start, stop, step]``)."""

    name: str
    kind: str
    limit: int = 0
    default: Any = None
    optional: bool = False


@dataclass(frozen=True)
class Interface:
    """What graded code may ask of one kind of served object: its facts (plain values, sent once) and methods."""

    facts: tuple[str, ...]
    methods: dict[str, tuple[Arg, ...]]


# Lab-05's counting stop: what a stop-string matcher reads of a stop, each read counted where it is served.
STR_METHODS: dict[str, tuple[Arg, ...]] = {
    "startswith": (Arg("prefix", "str", MAX_TEXT),),
    "endswith": (Arg("suffix", "str", MAX_TEXT),),
    "find": (Arg("sub", "str", MAX_TEXT),),
    "rfind": (Arg("sub", "str", MAX_TEXT),),
    "count": (Arg("sub", "str", MAX_TEXT),),
    "__contains__": (Arg("sub", "str", MAX_TEXT),),
    "__eq__": (Arg("other", "str", MAX_TEXT),),
}

INTERFACES: dict[str, Interface] = {
    "counting-tokenizer": Interface(
        facts=("vocab_size", "eos_token_id", "all_special_ids"),
        methods={
            "decode": (Arg("ids", "ids", MAX_IDS), Arg("skip_special_tokens", "bool", default=False, optional=True)),
            "encode": (Arg("text", "str", MAX_TEXT),),
            "convert_ids_to_tokens": (Arg("ids", "ids", MAX_IDS),),
        }),
    "counting-automaton": Interface(
        facts=("start", "num_states"),
        methods={"step": (Arg("state", "int"), Arg("byte", "int")), "is_accepting": (Arg("state", "int"),)}),
    "counting-str": Interface(
        facts=("length", "placeholder"),
        methods={"text": (), "getitem": (Arg("key", "key"),), **STR_METHODS}),
}


# ---------------------------------------------------------------------- both sides: plain, bounded values


def _ids(value: Any, limit: int) -> list[int]:
    if isinstance(value, (str, bytes)):
        raise ValueError("token ids must be a list of ints, not a string")
    try:
        drawn = list(itertools.islice(iter(value), limit + 1))  # an endless iterator is drawn to the bound, no further
    except TypeError:
        raise ValueError(f"token ids must be a list of ints, got {type(value).__name__}") from None
    if len(drawn) > limit:
        raise ValueError(f"at most {limit:,} token ids in one call")
    if set(map(type, drawn)) <= {int} and (not drawn or (min(drawn) >= -MAX_STATE and max(drawn) < MAX_STATE)):
        return drawn  # the usual case, checked in C; anything else gets the item-by-item check and its message
    for item in drawn:
        _int(item)
    return [int(item) for item in drawn]


def _int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"token id {value!r} is not an int")  # the tokenizer protocol's own complaint
    if not -MAX_STATE <= value < MAX_STATE:
        raise ValueError(f"token id {value} is out of range")
    return int(value)


def _check(arg: Arg, value: Any) -> Any:
    if arg.kind == "ids":
        return _ids(value, arg.limit)
    if arg.kind == "int":
        if isinstance(value, bool) or not isinstance(value, int) or not -MAX_STATE <= value < MAX_STATE:
            raise ValueError(f"{arg.name} must be an int, got {value!r:.40}")
        return int(value)
    if arg.kind == "bool":
        return bool(value) if isinstance(value, (bool, int)) else _fail(arg, value)
    if arg.kind == "str":
        if isinstance(value, ServedStr):
            value = value.text()
        if not isinstance(value, str):
            _fail(arg, value)
        if len(value) > arg.limit:
            raise ValueError(f"{arg.name}: at most {arg.limit:,} characters in one call")
        return str.__str__(value) if type(value) is not str else value
    if arg.kind == "key":
        if isinstance(value, slice):
            value = [value.start, value.stop, value.step]
        if isinstance(value, list) and len(value) == 3 and all(
                v is None or (isinstance(v, int) and not isinstance(v, bool) and abs(v) < MAX_STATE) for v in value):
            return [None if v is None else int(v) for v in value]
        if isinstance(value, int) and not isinstance(value, bool) and abs(value) < MAX_STATE:
            return int(value)
        raise TypeError(f"string indices must be integers or slices, not {type(value).__name__}")
    raise ValueError(f"an argument of unknown kind {arg.kind!r}")


def _fail(arg: Arg, value: Any) -> Any:
    raise ValueError(f"{arg.name} must be a {arg.kind}, got {type(value).__name__}")


def check_call(interface: Interface, method: Any, args: Any) -> list[Any]:
    """The arguments of one served call, checked against the declaration (on the trusted side, again)."""
    if not isinstance(method, str) or method not in interface.methods:
        raise AttributeError(f"{method!r} is not one of the methods served here: {sorted(interface.methods)}")
    declared = interface.methods[method]
    if not isinstance(args, list) or len(args) > len(declared):
        raise ValueError(f"{method} takes at most {len(declared)} arguments")
    missing = [a.name for a in declared[len(args):] if not a.optional]
    if missing:
        raise TypeError(f"{method}() missing argument {missing[0]!r}")
    values = [_check(arg, value) for arg, value in zip(declared, args, strict=False)]
    return values + [arg.default for arg in declared[len(args):]]


def check_result(value: Any) -> Any:
    """What a served method returns is plain data: a str, int, bool, or a list of them."""
    if type(value) in (str, int, bool) or value is None:
        return value
    if type(value) in (list, tuple) and all(type(v) in (str, int, bool) for v in value):
        return list(value)
    raise TypeError(f"a served method returned a {type(value).__name__}, not plain data")


def facts_of(kind: str, obj: Any) -> dict[str, Any]:
    """The plain facts a stand-in gets once, read on the trusted side."""
    facts = obj.sandbox_facts() if hasattr(type(obj), "sandbox_facts") else {
        name: getattr(obj, name) for name in INTERFACES[kind].facts}
    return {name: check_result(value) for name, value in facts.items()}


# ---------------------------------------------------------------------- the child: stand-ins


Call = Callable[[str, list[Any]], Any]


class ServedTokenizer:
    """A counting tokenizer as graded code sees it: each decode is served (and counted) by the trusted side."""

    def __init__(self, call: Call, home: int, facts: dict[str, Any]) -> None:
        self._call = call
        self.sandbox_home = home  # sent back across, it is the trusted side's object again
        self.vocab_size = int(facts["vocab_size"])
        self.eos_token_id = int(facts["eos_token_id"])
        self.all_special_ids = [int(i) for i in facts["all_special_ids"]]

    def decode(self, ids: Iterable[int], skip_special_tokens: bool = False) -> str:
        return str(self._call("decode", [_ids(ids, MAX_IDS), bool(skip_special_tokens)]))

    def encode(self, text: str) -> list[int]:
        return list(self._call("encode", [str(text)]))

    def convert_ids_to_tokens(self, ids: Iterable[int]) -> list[str]:
        return list(self._call("convert_ids_to_tokens", [_ids(ids, MAX_IDS)]))

    def decode_single_token_bytes(self, token_id: int) -> bytes:
        raise AssertionError("this lab is built on tokenizer.decode only: no raw token bytes")


class ServedAutomaton:
    """A counting automaton as graded code sees it: each step is served (and counted) by the trusted side."""

    def __init__(self, call: Call, home: int, facts: dict[str, Any]) -> None:
        self._call = call
        self.sandbox_home = home
        self.start = int(facts["start"])
        self.num_states = int(facts["num_states"])

    def step(self, state: int, byte: int) -> int:
        return int(self._call("step", [state, byte]))

    def is_accepting(self, state: int) -> bool:
        return bool(self._call("is_accepting", [state]))


class ServedStr(str):
    """A counting stop as graded code sees it: a ``str`` whose characters stay on the trusted side.

    Its own buffer holds placeholders (keyed by the text, so equal stops hash alike and others
    apart, and saying nothing of the text): reading it through ``str``'s own C functions
    (``str.__str__(stop)``, ``"".join``, ``text.endswith(stop)``) gives those, not the stop. Every
    read that means the stop (indexing, slicing, iterating, ``str()``, its methods) is served, and
    counted, by the trusted side.
    """

    _call: Call
    sandbox_home: int

    def __new__(cls, call: Call, home: int, facts: dict[str, Any]) -> ServedStr:
        placeholder = facts["placeholder"]
        if not isinstance(placeholder, str) or len(placeholder) != facts["length"]:
            raise ValueError("a served string arrives as its length and placeholder")
        served = str.__new__(cls, placeholder)
        served._call = call
        served.sandbox_home = home
        return served

    def text(self) -> str:
        return str(self._call("text", []))

    def __getitem__(self, key: Any) -> str:
        if isinstance(key, slice):
            key = [key.start, key.stop, key.step]
        return str(self._call("getitem", [key]))

    def __iter__(self) -> Any:
        return iter(self.text())

    def __str__(self) -> str:
        return self.text()

    def __repr__(self) -> str:
        return repr(self.text())

    def __format__(self, spec: str) -> str:
        return format(self.text(), spec)

    def __add__(self, other: str) -> str:
        return self.text() + other

    def __radd__(self, other: str) -> str:
        return other + self.text()

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, str):
            return NotImplemented
        return bool(self._call("__eq__", [other.text() if isinstance(other, ServedStr) else str.__str__(other)]))

    def __ne__(self, other: object) -> bool:
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal

    __hash__ = str.__hash__  # the placeholder's: equal stops have equal placeholders

    def __contains__(self, sub: object) -> bool:
        return bool(self._call("__contains__", [sub]))


def _served_str_method(name: str) -> Callable[..., Any]:
    def method(self: ServedStr, *args: Any) -> Any:
        return self._call(name, list(args))

    method.__name__ = name
    return method


for _name in ("startswith", "endswith", "find", "rfind", "count"):
    setattr(ServedStr, _name, _served_str_method(_name))


STAND_INS: dict[str, Callable[[Call, int, dict[str, Any]], Any]] = {
    "counting-tokenizer": ServedTokenizer,
    "counting-automaton": ServedAutomaton,
    "counting-str": ServedStr,
}
SERVED_STAND_INS = (ServedTokenizer, ServedAutomaton, ServedStr)


# ---------------------------------------------------------------------- the trusted side: a stop's placeholder

_KEY = os.urandom(16)  # per trusted process: a placeholder says nothing of the text it stands for


def placeholder(text: str) -> str:
    """As many private-use characters as ``text`` has, drawn from a keyed hash of it."""
    out: list[str] = []
    block = 0
    while len(out) < len(text):
        digest = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), key=_KEY,
                                 person=block.to_bytes(8, "little")).digest()
        out.extend(chr(0xE000 + (digest[i] << 4 | digest[i + 1] >> 4)) for i in range(0, len(digest) - 1, 2))
        block += 1
    return "".join(out[: len(text)])
