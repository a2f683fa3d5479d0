"""Does any function of the shipped test kit answer a task? A pytest plugin that finds out.

The release ships the test kit (``mini_vllm/testing/`` and each lab's ``test_lab.py``) but no answer.
An oracle in it must be a well-kept library, a whole-input formulation that is no incremental
answer, recorded data or a property, never a second implementation of a task. This plugin checks
that empirically, for one lab:

1. The lab's tests run on the reference (in this process, no sandbox), and every call the tests
   make into a task's function or class (a name the starter leaves as a stub) is recorded with what
   the reference returned (or the exception type it raised), per test.
2. Each public function and class of the kit (every shipped module of ``mini_vllm/testing`` and
   the lab's own test module) is then put in the task's place and given the same calls: a
   function the same arguments; a class the same constructor arguments and, in order, the same
   method calls. A kit function is also pasted into each method of a task's class (the constructor's
   arguments first, then the method's: :func:`pasted_into`). Exceptions and a per-call time limit end a
   candidate's run of a test.
3. A candidate that agrees with the reference on every call of some test (of at least
   :data:`MIN_CALLS` calls, so that a lucky constant does not count) would pass that test: it is
   written to the report with the test's name.

``tests/test_release_kit.py`` runs this for every lab and requires an empty report. By hand, with the
lab's folder as LAB: ``KIT_PROBE_LAB=lab-05 KIT_PROBE_REPORT=out.json LAB_IMPL=solution``
``.venv/bin/python -m pytest LAB -p instructor.kit_probe -p no:xdist``.
"""

from __future__ import annotations

import ast
import contextlib
import copy
import dataclasses
import functools
import importlib
import inspect
import json
import os
import re
import signal
import sys
import tempfile
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis.strategies import SearchStrategy

from mini_vllm.labs import DEFAULT_IMPL, LABS_DIR, REPO_ROOT, load_lab

MIN_CALLS = 3  # a test decided by fewer calls is left out: a constant could agree by luck
MAX_CALLS_PER_TEST = 400  # per target: enough to decide, bounded in memory and replay time
CALL_LIMIT_S = 2  # one candidate call; a kit function that waits on a server is not an answer
KIT_DIR = REPO_ROOT / "mini_vllm" / "testing"

Outcome = tuple[str, Any]  # ("ok", normalised value) or ("raise", exception type name)


_PLAIN = {bool, int, float, str, bytes, type(None)}  # normalised as themselves


def normalise(value: Any, depth: int = 0) -> Any:
    """A value as plain data, so the reference's dataclass and a kit's equivalent one compare equal."""
    if depth > 6:
        return "…"
    if value is None or isinstance(value, (bool, int, float, str, bytes)):
        return value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: normalise(getattr(value, f.name), depth + 1) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): normalise(v, depth + 1) for k, v in value.items()}
    plain = depth < 6 and isinstance(value, (list, tuple, set, frozenset)) and set(map(type, value)) <= _PLAIN
    if isinstance(value, (list, tuple)):  # a mask over 131,072 tokens: one pass, not a call per element
        return list(value) if plain else [normalise(v, depth + 1) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted(repr(v) if plain else repr(normalise(v, depth + 1)) for v in value)
    if isinstance(value, SearchStrategy):  # no task returns one, and its repr pretty-prints everything it was
        return "<a hypothesis strategy>"  # built from, a vocabulary included (lab-09's probe: 11.0 -> 9.1 s)
    return re.sub(r" at 0x[0-9a-f]+", "", repr(value))


def stub_names(lab: str) -> dict[str, list[str]]:
    """The starter's public names that hold a stub: a function -> [], a class -> its stubbed methods."""
    tree = ast.parse((next(LABS_DIR.glob(f"{lab}*")) / "starter.py").read_text(encoding="utf-8"))
    names: dict[str, list[str]] = {}
    for node in tree.body:
        if not isinstance(node, (ast.FunctionDef, ast.ClassDef)) or node.name.startswith("_"):
            continue
        if "NotImplementedError" not in ast.unparse(node):
            continue
        if isinstance(node, ast.FunctionDef):
            names[node.name] = []
        else:
            names[node.name] = [m.name for m in node.body if isinstance(m, ast.FunctionDef)
                                and (not m.name.startswith("_") or m.name == "__init__")]
    return names


class Recorder:
    """The calls the tests make into the reference's stubbed names, per test."""

    def __init__(self, lab: str) -> None:
        self.lab = lab
        self.test = ""
        # target -> test -> calls; a function's call is (args, kwargs, outcome); a class's "call" is one
        # instance's life: [(method, args, kwargs, outcome), ...] starting with __init__.
        self.calls: dict[str, dict[str, list[Any]]] = defaultdict(lambda: defaultdict(list))
        self.lives: dict[int, list[Any]] = {}
        self.keep: list[Any] = []  # instances stay alive while recorded, so an id is never reused
        self.constructing: set[int] = set()  # instances inside a wrapped __init__ (a subclass's, then super()'s)
        # Instances inside a recorded method: the calls it makes on itself (finish() calling push(), a read of
        # a property) are its own business; the replay makes only the test's calls, as the test did.
        self.inside: set[int] = set()

    def wants(self, target: str) -> bool:
        """Whether a call into ``target`` now is recorded: inside a test, and under the cap. Past the cap a call
        runs straight through, its arguments neither bound nor copied (a lab's test can make thousands)."""
        return bool(self.test) and len(self.calls[target][self.test]) < MAX_CALLS_PER_TEST

    def wrap_function(self, name: str, function: Any) -> Any:
        @functools.wraps(function)
        def recorded(*args: Any, **kwargs: Any) -> Any:
            if not self.wants(name):
                return function(*args, **kwargs)
            saved = _copied(*_positional(function, args, kwargs))
            try:
                result = function(*args, **kwargs)
            except Exception as error:
                self.calls[name][self.test].append((*saved, ("raise", type(error).__name__)))
                raise
            self.calls[name][self.test].append((*saved, ("ok", normalise(result))))
            return result
        return recorded

    def wrap_method(self, cls_name: str, method_name: str, method: Any) -> Any:
        if method_name == "__init__":
            return self._wrap_init(cls_name, method)

        @functools.wraps(method)
        def recorded(instance: Any, *args: Any, **kwargs: Any) -> Any:
            life = self.lives.get(id(instance))
            if life is None or len(life) >= MAX_CALLS_PER_TEST or id(instance) in self.inside:
                return method(instance, *args, **kwargs)  # not recorded, or a call the instance makes on itself
            args, kwargs = _positional(method, (instance, *args), kwargs)
            saved = _copied(args[1:], kwargs)
            self.inside.add(id(instance))
            try:
                result = method(*args, **kwargs)  # args[0] is the instance
            except Exception as error:
                life.append((method_name, *saved, ("raise", type(error).__name__)))
                raise
            finally:
                self.inside.discard(id(instance))
            life.append((method_name, *saved, ("ok", normalise(result))))
            return result
        return recorded

    def _wrap_init(self, cls_name: str, method: Any) -> Any:
        @functools.wraps(method)
        def recorded(instance: Any, *args: Any, **kwargs: Any) -> Any:
            if id(instance) in self.constructing or not self.wants(cls_name):  # super()'s, or past the cap
                return method(instance, *args, **kwargs)
            args, kwargs = _positional(method, (instance, *args), kwargs)
            saved = _copied(args[1:], kwargs)
            life: list[Any] = []
            self.calls[cls_name][self.test].append(life)
            self.constructing.add(id(instance))
            try:
                method(*args, **kwargs)
            except Exception as error:
                life.append(("__init__", *saved, ("raise", type(error).__name__)))
                raise
            finally:
                self.constructing.discard(id(instance))
            life.append(("__init__", *saved, ("ok", None)))
            self.lives[id(instance)] = life
            self.keep.append(instance)
            return None
        return recorded

    def wrap_property(self, cls_name: str, name: str, prop: property) -> property:
        """A property's reads are recorded like a method's calls with no arguments (lab-02's ``stopped``)."""
        return property(self.wrap_method(cls_name, name, prop.fget), prop.fset, prop.fdel, prop.__doc__)

    def install(self) -> None:
        module = load_lab(self.lab)
        for name, methods in stub_names(self.lab).items():
            target = getattr(module, name)
            if not methods:
                setattr(module, name, self.wrap_function(name, target))
                continue
            for method_name in methods:
                member = vars(target).get(method_name)
                if isinstance(member, property):  # wrapping it as a function would make every read truthy
                    setattr(target, method_name, self.wrap_property(name, method_name, member))
                elif inspect.isfunction(member):
                    setattr(target, method_name, self.wrap_method(name, method_name, member))


def _positional(function: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The call with every argument the target's signature can take by position passed by position: a kit
    function is then tried under the target's argument order, whatever it names its parameters (an adapter
    that renames arguments is no work)."""
    if not kwargs:
        return args, kwargs  # already by position (most calls: binding them would only cost time)
    try:
        bound = _signature(function).bind(*args, **kwargs)
    except (TypeError, ValueError):
        return args, kwargs
    return tuple(bound.args), dict(bound.kwargs)


@functools.cache
def _signature(function: Any) -> inspect.Signature:
    return inspect.signature(function)


def _copied(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The arguments as they were at the call (a test may change a list it passed afterwards, and a candidate
    the lists it is given): plain containers are copied through; any other object (a tokenizer, a grammar)
    is passed as itself. Deep-copying a 131,072-token vocabulary for every call and every candidate is what
    made lab-04's probe take nine minutes."""
    return tuple(_plain_copy(a) for a in args), {k: _plain_copy(v) for k, v in kwargs.items()}


def _plain_copy(value: Any, depth: int = 0) -> Any:
    if depth > 20:
        return value
    kind = type(value)
    if kind is list:
        return [_plain_copy(v, depth + 1) for v in value]
    if kind is tuple:
        return tuple(_plain_copy(v, depth + 1) for v in value)
    if kind is dict:
        return {k: _plain_copy(v, depth + 1) for k, v in value.items()}
    if kind in (set, bytearray):
        return copy.copy(value)
    return value


def kit_candidates(lab: str) -> dict[str, Any]:
    """Every public function and class the release ships in the test kit and in this lab's test module."""
    from instructor.release import ships

    found: dict[str, Any] = {}
    for path in sorted(KIT_DIR.glob("*.py")):
        if not ships(str(path.relative_to(REPO_ROOT))) or path.stem.startswith("_"):
            continue
        module = importlib.import_module(f"mini_vllm.testing.{path.stem}")
        found.update({f"mini_vllm/testing/{path.name}: {name}": value for name, value in _public(module)})
    for module in _lab_test_modules(lab):
        found.update({f"{lab} test_lab.py: {name}": value for name, value in _public(module)})
    return found


def _public(module: Any) -> Iterator[tuple[str, Any]]:
    for name, value in vars(module).items():
        if name.startswith(("_", "test_")) or getattr(value, "__module__", None) != module.__name__:
            continue
        if inspect.isclass(value) or inspect.isfunction(value):
            yield name, getattr(value, "__wrapped__", value)  # a pytest fixture's function, unwrapped


def _lab_test_modules(lab: str) -> list[Any]:
    folder = next(LABS_DIR.glob(f"{lab}*"))
    return [m for m in list(sys.modules.values())
            if getattr(m, "__file__", None) and Path(m.__file__).resolve() == (folder / "test_lab.py").resolve()]


@contextlib.contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    def stop(signum: int, frame: Any) -> None:
        raise TimeoutError("candidate call over its time limit")

    previous = signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


class TooSlow(Exception):
    """A candidate call ran past CALL_LIMIT_S: the candidate is dropped for this target (waiting on it for
    every recorded call of every test would cost hours, and a kit function that slow answers nothing)."""


def _call(function: Any, args: tuple[Any, ...], kwargs: dict[str, Any],
          compared: bool = True) -> tuple[Outcome, Any]:
    """(the call's outcome, its raw value or None), within the time limit, on copies of the arguments.

    ``compared=False`` (a constructor: only whether it raised is recorded) leaves the value as it is: made
    plain data, a candidate built over Tekken's vocabulary is millions of values (five minutes of lab-08's
    probe)."""
    args, kwargs = _copied(args, kwargs)
    try:
        with time_limit(CALL_LIMIT_S):
            value = function(*args, **kwargs)
        return ("ok", normalise(value) if compared else None), value
    except TimeoutError:
        raise TooSlow from None
    except KeyboardInterrupt:
        raise
    except BaseException as error:  # a candidate's failure of any kind is a disagreement
        return ("raise", type(error).__name__), None


def agrees_on_function(candidate: Any, calls: list[Any]) -> bool:
    return all(_call(candidate, args, kwargs)[0] == expected for args, kwargs, expected in calls)


def agrees_on_class(candidate: Any, lives: list[list[Any]]) -> bool:
    for life in lives:
        instance: Any = None
        for method, args, kwargs, expected in life:
            if method == "__init__":
                outcome, instance = _call(candidate, args, kwargs, compared=False)
                if outcome[0] != "ok":
                    return False
                continue
            if isinstance(inspect.getattr_static(type(instance), method, None), property):
                if _call(getattr, (instance, method), {})[0] != expected:  # a property is read, not called
                    return False
                continue
            bound = getattr(instance, method, None)
            if bound is None or _call(bound, args, kwargs)[0] != expected:
                return False
    return True


def pasted_into(function: Any, method: str) -> type:
    """``function`` pasted into a class as its ``method``: the class keeps its constructor's arguments and the
    method hands them to the function, before the method's own (lab-09's ``LexerCache(grammar, vocab).split(
    state)`` as ``lexer_split(grammar, vocab, state)``, plus a dict: what a student who pastes a kit function
    into the starter writes around it)."""

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        self.pasted_args, self.pasted_kwargs = args, kwargs

    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        return function(*self.pasted_args, *args, **{**self.pasted_kwargs, **kwargs})

    return type(f"Pasted_{method}", (), {"__init__": __init__, method: call})


def _tried_as(target_methods: list[str], candidates: dict[str, Any], is_class: bool) -> Iterator[tuple[str, Any]]:
    """The candidates for one target: like for like, and for a class each kit function pasted into each method."""
    for label, candidate in candidates.items():
        if inspect.isclass(candidate) == is_class:
            yield label, candidate
    if is_class:
        for label, candidate in candidates.items():
            if inspect.isfunction(candidate):
                for method in target_methods:
                    if method != "__init__":
                        yield f"{label} (pasted into {method})", pasted_into(candidate, method)


def answers(recorder: Recorder, candidates: dict[str, Any]) -> list[dict[str, str]]:
    """Each (candidate, target, test) where a kit callable agrees with the reference on the whole test."""
    found = []
    targets = stub_names(recorder.lab)
    for target, by_test in recorder.calls.items():
        is_class = bool(targets[target])
        for label, candidate in _tried_as(targets[target], candidates, is_class):
            for test, calls in by_test.items():
                # A class's calls are its methods' (constructing an object decides nothing).
                size = sum(len(life) - 1 for life in calls) if is_class else len(calls)
                if size < MIN_CALLS:
                    continue
                try:
                    agreed = agrees_on_class(candidate, calls) if is_class else agrees_on_function(candidate, calls)
                except TooSlow:
                    break
                if agreed:
                    found.append({"target": target, "candidate": label, "test": test})
                    break
    return found


@contextlib.contextmanager
def blank_tasks() -> Iterator[None]:
    """During the replay, every reference lab loaded here has its task names replaced by its blank starter's.

    In the release, a kit function that hands the work to the lab's own code (lab-02's ``CheckedPipeline``
    wraps ``lab.OutputPipeline``; lab-06's ``accepted_split`` shows your ``split_reasoning``'s answer where the
    rule accepts it) reaches the student's code, never an answer: here it must reach a stub too, or the
    probe would find the reference it delegates to."""
    swapped: list[tuple[Any, str, Any]] = []
    for number in sorted(p.name[4:6] for p in LABS_DIR.glob("lab-[0-9][0-9]-*")):
        reference = sys.modules.get(f"mini_vllm_labs.lab_{number}.{DEFAULT_IMPL}")
        if reference is None:
            continue
        starter = load_lab(f"lab-{number}", "starter")
        for name in stub_names(f"lab-{number}"):
            swapped.append((reference, name, getattr(reference, name)))
            setattr(reference, name, getattr(starter, name))
    try:
        yield
    finally:
        for module, name, value in swapped:
            setattr(module, name, value)


class KitProbe:
    def __init__(self, lab: str, report: Path) -> None:
        self.recorder = Recorder(lab)
        self.report = report

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.recorder.install()

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Any:
        self.recorder.test = item.nodeid.split("::", 1)[-1]
        try:
            return (yield)
        finally:
            self.recorder.test = ""

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        recorded = {target: sum(len(c) for c in by_test.values()) for target, by_test in self.recorder.calls.items()}
        recorded.update({name: 0 for name in stub_names(self.recorder.lab) if name not in recorded})
        candidates = kit_candidates(self.recorder.lab)
        here = os.getcwd()
        with tempfile.TemporaryDirectory() as scratch:
            os.chdir(scratch)  # a kit function given a task's arguments must not write into the course
            try:
                with blank_tasks():
                    found = answers(self.recorder, candidates)
            finally:
                os.chdir(here)
        self.report.write_text(json.dumps({"lab": self.recorder.lab, "recorded": recorded,
                                           "candidates": len(candidates), "answers": found}, indent=2) + "\n")


def pytest_configure(config: pytest.Config) -> None:
    lab = os.environ.get("KIT_PROBE_LAB")
    report = os.environ.get("KIT_PROBE_REPORT")
    if lab and report:
        config.pluginmanager.register(KitProbe(lab, Path(report)), "kit-probe")
