"""Instruments the tests install *inside* the graded module, in the tests' own process only.

Some costs can only be seen from inside: lab-01's cost test counts the characters handed to the
lab's own scanners; lab-06 and lab-08 ask how much a parser or an index keeps; lab-07 weighs the
memory each delta sets aside, even for a moment (a copy of the whole item so far shows there). A probe is course
code that wraps those names in the module under test, or walks its objects, and reports what it
found. ``undo()`` puts the module back as it was.

A probe runs where the lab's code runs, so what it reports is that code's word: code that wants to
can change the count. So probes run only where the lab runs in the tests' own process (``make
test``, ``LAB_SANDBOX=0``), never in the grading sandbox, and :func:`install` refuses a sandboxed
lab. There, lab-06's and lab-08's tests measure from outside instead (the child's memory as the
kernel counts it: ``RemoteLab.memory_in_use``), and so do lab-07's cost tests (the pages the kernel
hands the child fresh: ``RemoteLab.fresh_pages``, a formatter's copies of its item being fresh mappings
there), and lab-01's (a parser's copies of its open block, the same way).
"""

from __future__ import annotations

import re
import sys
import tracemalloc
from collections.abc import Callable
from types import ModuleType
from typing import Any

REGEX_METHODS = ("search", "match", "fullmatch", "finditer", "findall", "sub", "subn", "split")


class Patches:
    """Attribute changes made by a probe, undone in reverse order."""

    def __init__(self) -> None:
        self._undo: list[Callable[[], None]] = []

    def set_attr(self, target: Any, name: str, value: Any) -> None:
        old = getattr(target, name)
        setattr(target, name, value)
        self._undo.append(lambda: setattr(target, name, old))

    def set_item(self, mapping: dict[str, Any], key: str, value: Any) -> None:
        old = mapping[key]
        mapping[key] = value
        self._undo.append(lambda: mapping.__setitem__(key, old))

    def undo(self) -> None:
        while self._undo:
            self._undo.pop()()


class ScanCounter:
    """lab-01: characters handed to ``find_end_tag``, ``CallReader.feed``, ``parse_call`` and to regular
    expressions that the lab's code runs (up to the end of a match, else to the end of the text)."""

    def __init__(self, module: ModuleType) -> None:
        self.counts = {"find_end_tag": 0, "CallReader.feed": 0, "parse_call": 0, "regular expressions": 0}
        self.patches = Patches()
        namespaces = {id(f.__globals__): f.__globals__
                      for klass in (module.StreamingToolParser, module.CallReader)
                      for k in klass.__mro__ for f in vars(k).values() if callable(f) and hasattr(f, "__globals__")}
        for namespace in namespaces.values():
            for name in ("find_end_tag", "parse_call"):
                if name in namespace:
                    self.patches.set_item(namespace, name, self._counting(name, namespace[name]))
            reader_class = namespace.get("CallReader")
            if isinstance(reader_class, type):
                self.patches.set_item(namespace, "CallReader", self._counting_reader(reader_class))
        self._count_regexes(list(namespaces.values()))

    def _counting(self, name: str, original: Callable[..., Any]) -> Callable[..., Any]:
        counts = self.counts

        def wrapper(text: str, *args: Any, **kwargs: Any) -> Any:
            counts[name] += len(text)
            return original(text, *args, **kwargs)
        return wrapper

    def _counting_reader(self, reader_class: type) -> type:
        counts = self.counts

        class CountingReader(reader_class):  # type: ignore[misc]
            def feed(self, text: str) -> Any:
                counts["CallReader.feed"] += len(text)
                return super().feed(text)
        return CountingReader

    def _count_regexes(self, namespaces: list[dict[str, Any]]) -> None:
        counts = self.counts

        def scanned(method: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
            result = method(*args, **kwargs)
            text = next((a for a in args if isinstance(a, str)), "")
            start = next((a for a in args if type(a) is int), 0)  # a start position, if one was given
            end = result.end() if isinstance(result, re.Match) else len(text)
            counts["regular expressions"] += max(0, end - start)
            return result

        class CountingPattern:
            def __init__(self, pattern: re.Pattern[str]) -> None:
                self.pattern = pattern

            def __getattr__(self, name: str) -> Any:
                method = getattr(self.pattern, name)
                return (lambda *args, **kwargs: scanned(method, args, kwargs)) if name in REGEX_METHODS else method

        mine = {id(namespace) for namespace in namespaces}

        def counting_function(original: Callable[..., Any]) -> Callable[..., Any]:
            def call(pattern: Any, *args: Any, **kwargs: Any) -> Any:  # re.search(pattern, text, ...)
                if id(sys._getframe(1).f_globals) not in mine:
                    return original(pattern, *args, **kwargs)
                return scanned(lambda *a, **k: original(pattern, *a, **k), args, kwargs)
            return call

        for name in REGEX_METHODS:
            self.patches.set_attr(re, name, counting_function(getattr(re, name)))
        for namespace in namespaces:  # patterns compiled when the module loaded, in it or in its classes
            for key, value in list(namespace.items()):
                if isinstance(value, re.Pattern):
                    self.patches.set_item(namespace, key, CountingPattern(value))
                elif isinstance(value, type):
                    for attr, member in list(vars(value).items()):
                        if isinstance(member, re.Pattern):
                            self.patches.set_attr(value, attr, CountingPattern(member))

    def snapshot(self) -> dict[str, int]:
        return dict(self.counts)

    def undo(self) -> None:
        self.patches.undo()


class Introspection:
    """Questions about the lab's objects that only the process holding them can answer."""

    def __init__(self, module: ModuleType) -> None:
        self.module = module

    def characters_kept(self, obj: Any) -> int:
        """Every character reachable from ``obj``'s attributes: all a later call could scan again."""
        return _characters_kept(obj, set(), self.module)

    def integers_kept(self, obj: Any) -> int:
        """Every integer held in a container reachable from ``obj``'s attributes, each container counted once
        (lab-08: the token ids an index stores; a mask shared by many states is one list, counted once)."""
        return _integers_kept(obj, set())


def _characters_kept(obj: Any, seen: set[int], module: ModuleType) -> int:
    if id(obj) in seen or isinstance(obj, (type, ModuleType, int, float, bool)) or callable(obj) or obj is None:
        return 0
    seen.add(id(obj))
    if isinstance(obj, (str, bytes, bytearray)):
        return len(obj)
    if isinstance(obj, dict):
        return sum(_characters_kept(k, seen, module) + _characters_kept(v, seen, module) for k, v in obj.items())
    if isinstance(obj, (list, tuple, set, frozenset)) or type(obj).__name__ == "deque":
        return sum(_characters_kept(item, seen, module) for item in obj)
    attributes = dict(getattr(obj, "__dict__", {}))
    attributes.update({name: getattr(obj, name) for name in getattr(type(obj), "__slots__", ()) if hasattr(obj, name)})
    return sum(_characters_kept(value, seen, module) for value in attributes.values())


def _integers_kept(obj: Any, seen: set[int]) -> int:
    if id(obj) in seen or isinstance(obj, (type, ModuleType, str, bytes, bytearray)) or callable(obj) or obj is None:
        return 0
    if type(obj).__module__.startswith("mini_vllm."):  # what the tests handed in (the automaton, the vocabulary)
        return 0
    seen.add(id(obj))
    if type(obj).__name__ == "ndarray" or type(obj).__name__ == "array":  # numpy's, the stdlib's: their length
        return len(obj)
    if isinstance(obj, dict):
        items: list[Any] = [*obj.keys(), *obj.values()]
    elif isinstance(obj, (list, tuple, set, frozenset)) or type(obj).__name__ == "deque":
        items = list(obj)
    else:
        attributes = dict(getattr(obj, "__dict__", {}))
        attributes.update({name: getattr(obj, name) for name in getattr(type(obj), "__slots__", ())
                           if hasattr(obj, name)})
        return sum(_integers_kept(value, seen) for value in attributes.values())
    return sum(1 if isinstance(item, int) and not isinstance(item, bool) else _integers_kept(item, seen)
               for item in items)


class AllocationMeter:
    """lab-07: the bytes of memory one call sets aside beyond what was in use when it began, at its peak.

    Python's own allocator count (``tracemalloc``), not the kernel's: a copy of a 1 MB string made and
    dropped again within the call shows as 1 MB, and the same code with the same input allocates the same
    bytes on every run (only a thread of the tests' own, allocating during the call, could add to it).
    """

    def __init__(self, module: ModuleType) -> None:
        self._started = not tracemalloc.is_tracing()
        if self._started:
            tracemalloc.start()

    def measure(self, call: Callable[[], Any]) -> tuple[Any, int]:
        """``call()``'s result and the bytes it set aside at its peak."""
        tracemalloc.reset_peak()
        before = tracemalloc.get_traced_memory()[0]
        result = call()
        return result, tracemalloc.get_traced_memory()[1] - before

    def snapshot(self) -> dict[str, int]:
        return {"bytes in use": tracemalloc.get_traced_memory()[0]}

    def undo(self) -> None:
        if self._started and tracemalloc.is_tracing():
            tracemalloc.stop()


PROBES: dict[str, Callable[[ModuleType], Any]] = {"ScanCounter": ScanCounter, "Introspection": Introspection,
                                                 "AllocationMeter": AllocationMeter}


def install(lab: Any, name: str) -> Any:
    """Install probe ``name`` in ``lab``, a module of this process: an object with ``snapshot``, ``undo``.

    A lab in the grading sandbox is refused: a probe there would report what the graded code lets it.
    """
    if not isinstance(lab, ModuleType):
        raise TypeError(f"probes run only in the tests' own process, not in the grading sandbox ({lab!r}): "
                        "measure from outside, or mark the test in_process_only")
    return PROBES[name](lab)
