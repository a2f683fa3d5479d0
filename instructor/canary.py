"""A wrong implementation that marks everything it says, for the oracle contract check.

The "expected" column of a stream table must come from an oracle the student did not
write. To check that for every trace helper at once, the course grades this *canary*:
each lab's reference solution, wrapped so that every string it hands back to a test
(return values of public functions and methods, and public string attributes such as
``held_text`` read from outside the class) ends with :data:`CANARY`. Every graded test
then fails, every trace table is logged (``COURSE_TRACE_LOG``), and the marker must show
up in the tables' output column and never in their expected column. A helper that fell
back to "whatever the student's code said" would put the marker there.

A lab's canary module is two lines (:func:`canary_source`), loaded through ``LAB_IMPL_NN``
like any student file.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mini_vllm.labs import impl_path, lab_number, load_lab

CANARY = "«canary: not the oracle»"


def taint(value: Any) -> Any:
    """``value`` with :data:`CANARY` after every string in it (through tuples, lists, dicts and dataclasses)."""
    if isinstance(value, str):
        return value + CANARY
    if isinstance(value, tuple) and not hasattr(value, "_fields"):
        return tuple(taint(v) for v in value)
    if isinstance(value, list):
        return [taint(v) for v in value]
    if isinstance(value, dict):
        return {k: taint(v) for k, v in value.items()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        changes = {f.name: taint(getattr(value, f.name)) for f in dataclasses.fields(value) if f.init}
        return dataclasses.replace(value, **changes)
    return value


def _tainting(function: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return taint(function(*args, **kwargs))

    return wrapper


def _canary_class(cls: type, solution_file: str) -> type:
    """A subclass whose public methods return marked values, and whose public string
    attributes read as marked from anywhere but the solution's own code."""
    members: dict[str, Any] = {"__module__": cls.__module__, "__doc__": cls.__doc__}
    for name, member in inspect.getmembers(cls, inspect.isfunction):
        if not name.startswith("_"):
            members[name] = _tainting(member)

    def __getattribute__(self: Any, name: str) -> Any:
        value = object.__getattribute__(self, name)
        if name.startswith("_") or not isinstance(value, str):
            return value
        caller = sys._getframe(1).f_code.co_filename
        return value if caller == solution_file else taint(value)

    members["__getattribute__"] = __getattribute__
    return type(cls.__name__, (cls,), members)


def canary_namespace(lab: str) -> dict[str, Any]:
    """The public names of ``lab``'s solution, with classes and functions replaced by marking ones."""
    solution = load_lab(lab, "solution")
    solution_file = str(impl_path(lab, "solution"))
    namespace: dict[str, Any] = {}
    for name, value in vars(solution).items():
        if name.startswith("_"):
            continue
        mine = getattr(value, "__module__", None) == solution.__name__
        if mine and inspect.isclass(value) and not dataclasses.is_dataclass(value) \
                and not issubclass(value, BaseException):
            namespace[name] = _canary_class(value, solution_file)
        elif mine and inspect.isfunction(value):
            namespace[name] = _tainting(value)
        else:
            namespace[name] = value  # value types, errors, constants: as the reference has them
    return namespace


def canary_source(lab: str) -> str:
    """The text of a canary module for ``lab`` (write it to a ``.py`` file, point ``LAB_IMPL_NN`` at it)."""
    return (f'"""The lab-{lab_number(lab)} canary: the reference, marking everything it returns."""\n'
            "from instructor.canary import canary_namespace\n\n"
            f"globals().update(canary_namespace({lab_number(lab)!r}))\n")


def write_canary(lab: str, folder: Path) -> Path:
    path = folder / f"canary_lab_{lab_number(lab)}.py"
    path.write_text(canary_source(lab), encoding="utf-8")
    return path
