"""What each lab's names return, as the lab's API states it: checked on the trusted side before a test asks.

A value graded code returns crosses as plain data (:mod:`.wire`), or as a reference to an object of the
child. A reference never answers a test's question: an object whose ``__contains__``, ``__bool__`` and
``__eq__`` say yes to everything would pass ``assert token in result``. So every value that comes back from
a lab's function, method or attribute is checked here against the type the lab's API states (``str``,
``list[int]``, ``bool``, a declared value type of :mod:`mini_vllm.labtypes` and its fields), before the
test sees it; a value of another type fails the test, naming the call and both types. The only references
that reach a test are the objects of the lab's own classes its constructors return, and those answer no
question either (:class:`mini_vllm.sandbox.parent.Gate` refuses ``bool``, ``in``, ``len`` and iteration
asked of them): the test may only call their declared methods.

The API is the one the course records from the reference solutions (``mini_vllm/testing/fixtures/api.json``,
which the release's starters are checked against), plus the attributes the tests read
(:data:`ATTRIBUTES`) and the type names the labs alias (:data:`ALIASES`).
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import json
import re
from pathlib import Path
from typing import Any

from mini_vllm.sandbox.proxies import Remote

API_FILE = "mini_vllm/testing/fixtures/api.json"

# Type names a lab's API uses that are aliases in its module (the solution's own names).
ALIASES = {
    "07": {"Event": "dict[str, Any]"},
    "09": {"LexerState": "tuple[tuple[int, int], ...]"},
}
# The attributes (and properties) of a lab's classes that its tests read, with their types (each starter says so).
ATTRIBUTES = {
    "01": {"StreamingToolParser.held_text": "str"},
    "02": {"OutputPipeline.stopped": "bool"},
    "03": {"StreamingDetokenizer.held_bytes": "bytes"},
    "05": {"StopStringChecker.held_text": "str", "StopStringChecker.stopped": "bool",
           "StopStringChecker.stop_reason": "str | None"},
    "06": {"StreamingReasoningParser.held_text": "str", "StreamingReasoningParser.in_reasoning": "bool"},
    "07": {"ResponsesEventFormatter.output": "list[dict[str, Any]]"},
    "08": {"TokenIndex.stats": "IndexStats", "GrammarCursor.state": "int", "GrammarCursor.pending": "bytes",
           "GrammarCursor.finished": "bool", "StructuredSampler.phase": "str", "StructuredSampler.state": "int"},
    "09": {"ByteMatcher.lexer_state": "LexerState"},
}
# A lab's class whose methods the listing records on its base (the listing names each class's own members).
BASES = {"07": {"MessagesEventFormatter": "EventFormatter", "ResponsesEventFormatter": "EventFormatter"}}
# Modules whose classes a lab's API names, besides the lab's own labtypes module.
SHARED_TYPES = ("mini_vllm.sampling",)


class NotAsDeclared(BaseException):
    """Graded code returned a value of a type its lab's API does not state, or a test asked a reference a question.

    A BaseException, like the sandbox's other failures: a test's ``pytest.raises(TypeError)`` (or hypothesis)
    must not take it for the submission's own error.
    """


@functools.cache
def _listing() -> dict[str, dict[str, str]]:
    # The repository's root found from this file, not from mini_vllm.labs: the loader opens the sandbox, so
    # the sandbox does not import the loader (imports run one way). api.json's keys are lab folders, lab-NN-*.
    recorded = json.loads((Path(__file__).resolve().parents[2] / API_FILE).read_text(encoding="utf-8"))
    return {folder[len("lab-"):len("lab-NN")]: names for folder, names in recorded.items()}


def is_class(number: str, name: str) -> bool:
    """``name`` is one of lab ``number``'s own classes (calling it constructs an object of the child)."""
    return _listing().get(number, {}).get(name) == "class"


def returns(number: str, qualname: str) -> str | None:
    """The type ``lab-NN.qualname`` (a function, ``Class.method`` or ``Class.attribute``) states, or None."""
    entry = _entry(number, qualname)
    if entry is None or not entry.startswith("("):  # an attribute, or a property (the listing gives no type)
        return ATTRIBUTES.get(number, {}).get(qualname)
    found = re.search(r"\) -> '(.*)'$", entry) or re.search(r"\) -> (.*)$", entry)
    return found.group(1) if found else "Any"  # no return type stated: plain data of any type


def is_method(number: str, qualname: str) -> bool:
    entry = _entry(number, qualname)
    return entry is not None and entry.startswith("(")


def _entry(number: str, qualname: str) -> str | None:
    listing = _listing().get(number, {})
    while qualname not in listing and "." in qualname:
        owner, name = qualname.split(".", 1)
        base = BASES.get(number, {}).get(owner)
        if base is None:
            return None
        qualname = f"{base}.{name}"
    return listing.get(qualname)


# ---------------------------------------------------------------------------------- the type language

Node = tuple[str, tuple["Node", ...]]  # a name and its arguments: ("list", (("int", ()),)); a union is ("|", ...)
_TOKEN = re.compile(r"\s*(\.\.\.|[\w.]+|[\[\],|])")


@functools.cache
def parse(text: str) -> Node:
    """``"tuple[str, str | None]"`` as a tree of names and arguments."""
    tokens = _TOKEN.findall(text)
    if "".join(tokens) != re.sub(r"\s+", "", text):
        raise ValueError(f"not a type this checker reads: {text!r}")
    node, rest = _union(tokens)
    if rest:
        raise ValueError(f"not a type this checker reads: {text!r}")
    return node


def _union(tokens: list[str]) -> tuple[Node, list[str]]:
    parts = []
    node, tokens = _term(tokens)
    parts.append(node)
    while tokens and tokens[0] == "|":
        node, tokens = _term(tokens[1:])
        parts.append(node)
    return (parts[0] if len(parts) == 1 else ("|", tuple(parts))), tokens


def _term(tokens: list[str]) -> tuple[Node, list[str]]:
    name, tokens = tokens[0], tokens[1:]
    if not tokens or tokens[0] != "[":
        return (name, ()), tokens
    args = []
    tokens = tokens[1:]
    while True:
        node, tokens = _union(tokens)
        args.append(node)
        if tokens[0] == "]":
            return (name, tuple(args)), tokens[1:]
        tokens = tokens[1:]  # ","


# ---------------------------------------------------------------------------------- the check

_SCALARS: dict[str, tuple[type, ...]] = {"str": (str,), "bytes": (bytes,), "bool": (bool,), "int": (int,),
                                         "float": (float, int)}
_SEQUENCES = {"list", "Sequence", "tuple"}
_SETS = {"frozenset", "set", "AbstractSet"}
_MAPPINGS = {"dict", "Mapping"}
_PLAIN = (str, bytes, bool, int, float, type(None))


def check(number: str, qualname: str, value: Any) -> Any:
    """``value`` if it is what ``lab-NN.qualname`` states it returns; else :class:`NotAsDeclared`."""
    stated = returns(number, qualname)
    if stated is None:
        raise NotAsDeclared(f"lab-{number}: {qualname} is not part of the lab's API, so a test cannot read it")
    problem = _problem(value, parse(stated), number)
    if problem:
        raise NotAsDeclared(f"a value your code returns must be of the type the lab's API states: {qualname} "
                            f"returned {problem}, where the API states {stated} (values cross as plain data; an "
                            "object of your own answers no test's question)")
    return value


def _problem(value: Any, node: Node, number: str) -> str | None:
    """None when ``value`` is of type ``node``; else what it is, for the message."""
    name, args = node
    if name == "|":
        if any(_problem(value, option, number) is None for option in args):
            return None
        return what(value)
    if name == "Any" or name == "object":
        return _plain_problem(value, number)
    if name == "None":
        return None if value is None else what(value)
    if name in _SCALARS:  # what crossed is a built-in value (a subclass of str crosses as a reference)
        return None if isinstance(value, _SCALARS[name]) else what(value)
    if name in _SEQUENCES:
        if type(value) not in (list, tuple):
            return what(value)
        if name == "tuple" and args and not (len(args) == 2 and args[1][0] == "..."):
            if len(value) != len(args):
                return f"a tuple of {len(value)} items (the API states {len(args)})"
            return _first(_problem(item, arg, number) for item, arg in zip(value, args, strict=True))
        return _items_problem(value, args[0] if args else ("Any", ()), number)
    if name in _SETS:
        if type(value) not in (set, frozenset):
            return what(value)
        return _items_problem(list(value), args[0] if args else ("Any", ()), number)
    if name in _MAPPINGS:
        if type(value) is not dict:
            return what(value)
        key, item = args if len(args) == 2 else (("Any", ()), ("Any", ()))
        return _items_problem(list(value), key, number) or _items_problem(list(value.values()), item, number)
    alias = ALIASES.get(number, {}).get(name)
    if alias is not None:
        return _problem(value, parse(alias), number)
    cls = declared_class(number, name)
    if cls is None:
        raise NotAsDeclared(f"lab-{number}'s API names a type the grader does not know: {name}")
    if type(value) is not cls:
        return what(value)
    return _fields_problem(value, cls, number)


def _items_problem(items: list[Any], node: Node, number: str) -> str | None:
    name = node[0]
    if name in _SCALARS and name != "float":  # token ids, texts: one pass in C for the usual case
        kinds = set(map(type, items))
        if kinds <= set(_SCALARS[name]) | ({bool} if name == "int" else set()):
            return None
    return _first(_problem(item, node, number) for item in items)


def _plain_problem(value: Any, number: str) -> str | None:
    kind = type(value)
    if kind in _PLAIN:
        return None
    if kind in (list, tuple, set, frozenset):
        if set(map(type, value)) <= set(_PLAIN):
            return None
        return _first(_plain_problem(item, number) for item in value)
    if kind is dict:
        return _first(_plain_problem(item, number) for pair in value.items() for item in pair)
    if dataclasses.is_dataclass(value) or (isinstance(value, tuple) and hasattr(value, "_fields")):
        from mini_vllm.sandbox.wire import is_value

        return _fields_problem(value, kind, number) if is_value(value) else what(value)
    return what(value)


def _fields_problem(value: Any, cls: type, number: str) -> str | None:
    for field, stated in _field_types(cls).items():
        problem = _problem(getattr(value, field), parse(stated), number)
        if problem:
            return f"a {cls.__name__} whose {field} is {problem}"
    return None


@functools.cache
def _field_types(cls: type) -> dict[str, str]:
    if dataclasses.is_dataclass(cls):
        stated: dict[str, Any] = {f.name: f.type for f in dataclasses.fields(cls)}
    else:  # a named tuple
        stated = dict(getattr(cls, "__annotations__", {}))
    return {name: _as_text(kind) for name, kind in stated.items()}


def _as_text(kind: Any) -> str:
    kind = getattr(kind, "__forward_arg__", kind)  # a named tuple's field, under `from __future__ import annotations`
    return kind if isinstance(kind, str) else getattr(kind, "__name__", str(kind))


@functools.cache
def declared_class(number: str, name: str) -> type | None:
    """The declared value type ``name`` of lab ``number`` (its labtypes module, or the engine's shared ones)."""
    modules = [f"mini_vllm.labtypes.lab{number}", *SHARED_TYPES]
    for module_name in modules:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        found = getattr(module, name, None)
        if isinstance(found, type):
            return found
    return None


def _first(problems: Any) -> str | None:
    return next((p for p in problems if p is not None), None)


def what(value: Any) -> str:
    if isinstance(value, Remote):
        return "an object of your own code (a reference, not plain data)"
    kind = type(value)
    name = kind.__name__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"
    return f"{'an' if name[0] in 'aeiou' else 'a'} {name}"
