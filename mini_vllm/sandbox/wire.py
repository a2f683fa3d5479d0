"""What crosses the sandbox boundary, and how: plain data, declared values, exceptions and references.

Every message is MessagePack (``msgspec``), and decoding one never runs code from the other
side: no pickle, no import named by the peer outside the allow-list below. Besides the plain
types MessagePack has (str, bytes, int, float, bool, None, lists and maps), four kinds of value
travel as extension types:

- a **tuple** or a **set**, so ``("a", "b")`` does not come back as a list;
- a **declared value**: an instance of a dataclass or named tuple defined in one of
  :data:`VALUE_MODULES` (``mini_vllm.labtypes.lab01.ToolCall``, ``SamplingParams``), sent as its
  fields and rebuilt by the receiver with its *own* copy of the class;
- a **tokenizer by family**: a tokenizer the engine can rebuild by name (``"bpe"``) is rebuilt
  on the other side, so looking up its vocabulary costs no round trip;
- an **exception**, as its class, arguments, attributes and the traceback text;
- a **reference** to any other object: it stays where it lives, and the receiver gets a proxy
  whose calls come back as requests (see :mod:`mini_vllm.sandbox.peer`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
from collections.abc import Callable
from typing import Any

import msgspec

from mini_vllm.sandbox.policy import ERROR_MODULES, MAX_INT, VALUE_MODULES
from mini_vllm.sandbox.served import facts_of

TUPLE, SET, VALUE, FAMILY, ERROR, REF, BIGINT, MIRROR, SERVED = 1, 2, 3, 4, 5, 6, 7, 8, 9

# VALUE_MODULES: modules whose dataclasses and named tuples travel by value. Both sides import them, so the
# receiver rebuilds a value with the class *it* trusts. A student's own dataclass is not there: it travels by
# reference, and the trusted side can only call its declared methods. ERROR_MODULES: exceptions rebuilt as
# themselves (the builtins, and those the labs declare).
PLAIN = (str, int, float, bool, type(None), bytes)
_NOT_INT = frozenset({str, float, type(None), bytes})
_INTS = frozenset({int, bool})
_PLAIN_KINDS = _NOT_INT | _INTS


def _flat_and_plain(items: list[Any]) -> bool:
    """A list msgpack carries as it is: plain values only, and every int within 64 bits."""
    kinds = set(map(type, items))
    if kinds <= _NOT_INT:
        return True
    if not kinds <= _PLAIN_KINDS:
        return False
    # Token ids are checked in C; a list that mixes kinds (a reply, [kind, number, value]) has its ints picked out.
    ints = items if kinds <= _INTS else [item for item in items if type(item) is int]
    return not ints or bool(min(ints) >= -MAX_INT and max(ints) < MAX_INT)


class WireError(Exception):
    """A message that does not decode, or a value that may not cross."""


class ForeignError(Exception):
    """An exception from the other side whose class is not one both sides share.

    The message names the original class: ``RecursionError``-like built-ins come back as
    themselves, a student's own ``class Oops(Exception)`` as ``ForeignError("Oops: ...")``.
    """


def _trusted_module(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or (p.endswith(".") and name.startswith(p)) for p in prefixes)


def find_class(module: str, qualname: str, prefixes: tuple[str, ...]) -> type | None:
    """The class ``module.qualname`` if the module is on the allow-list (imported if need be)."""
    if not _trusted_module(module, prefixes) or "." in qualname or qualname.startswith("_"):
        return None
    try:
        found = getattr(importlib.import_module(module), qualname, None)
    except ImportError:
        return None
    return found if isinstance(found, type) else None


def is_value(obj: object) -> bool:
    cls = type(obj)
    return _trusted_module(cls.__module__, VALUE_MODULES) and (
        dataclasses.is_dataclass(cls) or (issubclass(cls, tuple) and hasattr(cls, "_fields")))


# The engine's own tokenizer classes. A subclass (a test's counting wrapper) is never rebuilt by
# name: it must stay where it is, so that what it counts is counted where the tests can trust it.
FAMILY_CLASSES = frozenset({"ByteTokenizer", "BPETokenizer", "SentencePieceBPETokenizer", "MistralTokenizer",
                            "TekkenTokenizer"})


def tokenizer_family(obj: object) -> str | None:
    """The family a tokenizer can be rebuilt from (the shipped ones say so), if any."""
    cls = type(obj)
    if cls.__name__ not in FAMILY_CLASSES or not cls.__module__.startswith("mini_vllm."):
        return None
    family = getattr(obj, "__dict__", {}).get("sandbox_family")
    return family if isinstance(family, str) else None


class Codec:
    """Encodes and decodes one side's messages.

    ``to_ref(obj)`` and ``from_ref(payload)`` are the peer's: they turn an object into the
    reference that stands for it, and a reference back into the object or a proxy.
    """

    def __init__(self, to_ref: Callable[[Any], list[Any]], from_ref: Callable[[list[Any]], Any],
                 rebuild_family: Callable[[str], Any], build_mirror: Callable[[str, Any], Any],
                 build_served: Callable[[str, int, Any], Any], trusted: bool) -> None:
        self._to_ref = to_ref
        self._from_ref = from_ref
        self._rebuild_family = rebuild_family
        self._build_mirror = build_mirror
        self._build_served = build_served
        self._trusted = trusted  # only the trusted side serves objects through a declared interface
        self._encoder = msgspec.msgpack.Encoder()
        self._decoder = msgspec.msgpack.Decoder(ext_hook=self._ext)
        self.families_sent: set[str] = set()

    def encode(self, message: Any) -> bytes:
        return self._encoder.encode(self._prepare(message))

    def decode(self, data: bytes) -> Any:
        try:
            return self._decoder.decode(data)
        except (msgspec.DecodeError, ValueError, TypeError, KeyError, IndexError) as error:
            raise WireError(f"a message that does not decode: {error}") from None

    # ------------------------------------------------------------------ encoding

    def _prepare(self, obj: Any) -> Any:
        kind = type(obj)
        if kind in PLAIN:
            if kind is int and not -MAX_INT <= obj < MAX_INT:
                return self._ext_of(BIGINT, str(obj))
            return obj
        if kind is list:
            if _flat_and_plain(obj):
                return obj  # token ids, text pieces: checked in one pass in C, not one call per item
            return [self._prepare(item) for item in obj]
        if kind is dict:
            return {self._prepare(k): self._prepare(v) for k, v in obj.items()}
        if kind is tuple:
            return self._ext_of(TUPLE, [self._prepare(item) for item in obj])
        if kind in (set, frozenset):
            return self._ext_of(SET, [self._prepare(item) for item in obj])
        if isinstance(obj, BaseException):
            return self._ext_of(ERROR, self.describe_error(obj))
        if is_value(obj):
            fields = (obj._asdict() if isinstance(obj, tuple)  # type: ignore[attr-defined]
                      else {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)})
            return self._ext_of(VALUE, [type(obj).__module__, type(obj).__qualname__, self._prepare(fields)])
        family = tokenizer_family(obj)
        if family is not None:
            self.families_sent.add(family)
            return self._ext_of(FAMILY, family)
        # A test's object that declares an interface is served from here: the child gets a stand-in that
        # calls back (mini_vllm/sandbox/served.py). Only the trusted side serves that way.
        interface = getattr(type(obj), "sandbox_interface", None) if self._trusted else None
        if isinstance(interface, str):
            return self._ext_of(SERVED, [interface, self._to_ref(obj)[1], self._prepare(facts_of(interface, obj))])
        # An object that is plain data under its methods (a PieceTokenizer, a Hugging Face tokenizer) may say
        # how to rebuild it: the child gets its own copy, and nothing it does to it reaches this side.
        mine = self._trusted or type(obj).__module__.startswith("mini_vllm.")
        mirror = getattr(type(obj), "sandbox_mirror", None) if mine else None
        if mirror is not None:
            kind, state = mirror(obj)
            return self._ext_of(MIRROR, [kind, self._prepare(state)])
        return self._ext_of(REF, self._to_ref(obj))

    def _ext_of(self, code: int, payload: Any) -> msgspec.msgpack.Ext:
        return msgspec.msgpack.Ext(code, self._encoder.encode(payload))

    def describe_error(self, error: BaseException) -> list[Any]:
        cls = type(error)
        attrs = {k: v for k, v in vars(error).items() if isinstance(k, str) and not k.startswith("_")
                 and type(v) in PLAIN}
        args = [a for a in error.args if type(a) in PLAIN or (type(a) is tuple and all(type(x) in PLAIN for x in a))]
        return [cls.__module__, cls.__qualname__, self._prepare(args), attrs, _safe_str(error),
                getattr(error, "sandbox_traceback", "")]

    # ------------------------------------------------------------------ decoding

    def _ext(self, code: int, data: memoryview) -> Any:
        inner = self._decoder.decode(data)
        if code == TUPLE:
            return tuple(inner)
        if code == SET:
            return set(inner)
        if code == BIGINT:
            return int(inner)
        if code == VALUE:
            return self._rebuild_value(*inner)
        if code == FAMILY:
            return self._rebuild_family(inner)
        if code == ERROR:
            return rebuild_error(*inner)
        if code == REF:
            return self._from_ref(inner)
        if code == MIRROR:
            return self._build_mirror(*inner)
        if code == SERVED:
            return self._build_served(*inner)
        raise WireError(f"unknown extension type {code}")

    @staticmethod
    def _rebuild_value(module: str, qualname: str, fields: dict[str, Any]) -> Any:
        cls = find_class(module, qualname, VALUE_MODULES)
        if cls is None:
            raise WireError(f"{module}.{qualname} is not a declared value type")
        if issubclass(cls, tuple):
            return cls(**fields)
        declared = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
        if set(fields) != declared:
            raise WireError(f"{qualname} arrived with fields {sorted(fields)}, declared {sorted(declared)}")
        value = object.__new__(cls)
        for name, field_value in fields.items():  # object.__setattr__: frozen dataclasses too, no __init__ re-run
            object.__setattr__(value, name, field_value)
        return value


def rebuild_error(module: str, qualname: str, args: list[Any], attrs: dict[str, Any], text: str,
                  trace: str) -> BaseException:
    """The exception the other side raised, as one of our own classes (or :class:`ForeignError`)."""
    cls = find_class(module, qualname, ERROR_MODULES)
    error: BaseException
    if cls is not None and issubclass(cls, Exception):
        error = cls.__new__(cls)  # no __init__ (its signature is the class's business); OSError needs its own __new__
        error.args = tuple(args)
        for name, value in attrs.items():
            with contextlib.suppress(AttributeError, TypeError):
                setattr(error, name, value)
        if str(error) != text:  # a class whose __str__ needs state we did not send: keep the words
            error = ForeignError(f"{qualname}: {text}") if cls is not StopIteration else StopIteration(*args)
    else:  # SystemExit, KeyboardInterrupt, pytest's outcomes, a student's own class: never raised as such
        error = ForeignError(f"{qualname}: {text}" if text else qualname)
    error.sandbox_traceback = trace  # type: ignore[attr-defined]
    if trace and hasattr(error, "add_note"):
        error.add_note(trace)
    return error


def _safe_str(error: BaseException) -> str:
    try:
        return str(error)
    except Exception:  # a broken __str__ must not break the report of the error
        return f"<{type(error).__name__} whose str() failed>"
