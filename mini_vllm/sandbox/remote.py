"""The trusted side of the sandbox: a lab whose code runs in a child process, seen through proxies.

``load_lab("lab-03")`` in a graded run returns a :class:`RemoteLab`. Its attributes are the
lab's names: the given value types and constants come from :mod:`mini_vllm.labtypes` (trusted
copies), every other name is a :class:`RemoteName` whose call runs in the child. The child is
started on first use and started again after it is killed, so a timeout or a crash costs the
test it happened in, not the rest of the lab.

Budgets (:mod:`mini_vllm.sandbox.budget`): a call may use its lab's budget of CPU seconds, as the
kernel counts them for the child and everything it started, and last at most a wall ceiling
several times that (less the time it waited for a CPU), so a busy machine costs no points. A call
that runs out is stopped (SIGINT first, then the process) and its test fails naming the call; the
test is run once more in a fresh child before that counts (:mod:`mini_vllm.testing.retry`), unless
the same call already ran out twice in a row. Budgets never shrink.

The other jobs live beside this one: :mod:`.worker` (one child's life), :mod:`.parent` (the trusted end of the
channel: budgets and checked answers), :mod:`.costs` (what calls cost), :mod:`.failures` (how a call can end),
and every number of the policy in :mod:`.policy`.
"""

from __future__ import annotations

import atexit
import importlib
import os
from pathlib import Path
from typing import Any

from mini_vllm.sandbox import costs
from mini_vllm.sandbox.budget import call_budget
from mini_vllm.sandbox.costs import fresh_pages, memory_held, reset_costs
from mini_vllm.sandbox.failures import (
    CallInterrupted,
    CallTimeout,
    ChildDied,
    LabDoesNotImport,
    SandboxFailure,
    TooMuchData,
)
from mini_vllm.sandbox.peer import Peer
from mini_vllm.sandbox.policy import BYTES_PER_TEST, SERVED_PER_TEST_S
from mini_vllm.sandbox.worker import Worker

# What the grading plugin and the tests reach through this module (the failures, the bounds they check).
__all__ = [
    "BYTES_PER_TEST",
    "SERVED_PER_TEST_S",
    "CallInterrupted",
    "CallTimeout",
    "ChildDied",
    "LabDoesNotImport",
    "ReferenceLab",
    "RemoteLab",
    "RemoteName",
    "SandboxFailure",
    "TooMuchData",
    "Worker",
    "begin_test",
    "call_budget",
    "call_costs",
    "memory_held",
    "missing_lab",
    "open_lab",
    "renew_after_timeout",
    "reset_costs",
    "stop_all",
]


def labtypes_of(number: str) -> Any:
    try:
        return importlib.import_module(f"mini_vllm.labtypes.lab{number}")
    except ImportError:
        return None


class RemoteName:
    """A name of a lab that lives on the other side (``lab.StreamingDetokenizer``): calling it is a request."""

    __slots__ = ("_owner", "_path")

    def __init__(self, owner: Any, path: tuple[str, ...]) -> None:
        self._owner = owner
        self._path = path

    def __getattr__(self, name: str) -> RemoteName:
        if name.startswith("__"):
            raise AttributeError(name)
        return RemoteName(self._owner, (*self._path, name))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._owner.call_path(self._path, list(args), kwargs)

    def __mro_entries__(self, bases: tuple[Any, ...]) -> tuple[type, ...]:
        raise TypeError(f"{'.'.join(self._path)} runs in the grading sandbox: it cannot be subclassed here")

    def __repr__(self) -> str:
        return f"<{'.'.join(self._path)} in the grading sandbox>"


class ReferenceLab:
    """Inside the child: a lab composed from the trusted side's reference (``LAB_COMPOSE=reference``)."""

    def __init__(self, peer: Peer, number: str) -> None:
        self._peer = peer
        self._number = number
        self._given = labtypes_of(number)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        if self._given is not None and hasattr(self._given, name):
            return getattr(self._given, name)
        return RemoteName(self, (name,))

    def call_path(self, path: tuple[str, ...], args: list[Any], kwargs: dict[str, Any]) -> Any:
        if len(path) != 1:
            raise AttributeError(f"lab-{self._number}.{'.'.join(path)}: only the lab's own names are served")
        return self._peer.request("call_path", [self._number, path[0]], args, kwargs)


class RemoteLab:
    """What ``load_lab`` returns in a graded run: the lab's names, served from a sandboxed child."""

    def __init__(self, number: str, worker: Worker) -> None:
        self._number = number
        self._worker = worker
        self._given = labtypes_of(number)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        if self._given is not None and hasattr(self._given, name) and not name.startswith("_"):
            return getattr(self._given, name)
        return RemoteName(self, (name,))

    def call_path(self, path: tuple[str, ...], args: list[Any], kwargs: dict[str, Any]) -> Any:
        peer = self._worker.ensure()
        return peer.request("call_path", list(path), args, kwargs)

    def restart(self) -> None:
        """The next call runs in a fresh child, so :meth:`memory_in_use` counts from a known start."""
        self._worker.stop()

    def memory_in_use(self) -> int:
        """Bytes the child holds beyond what it held before the submission was imported (:func:`memory_held`).

        Read here from ``/proc``, never asked of the child, and counted from before any of the graded
        code ran: memory that code set aside earlier and gives back later (to hide what it keeps) is
        counted while it is held. A test that bounds what graded code keeps calls :meth:`restart`
        first and bounds this figure, not a difference of two readings.
        """
        process = self._worker.process
        return 0 if process is None else max(0, memory_held(process.pid) - self._worker.memory_at_start)

    def fresh_pages(self) -> int:
        """Pages the child's kernel has handed it fresh so far (:func:`fresh_pages`): a count of work, read here.

        Only the growth between two readings around a call means something (the child's start and the tests
        before count too); lab-07's cost tests bound that growth per delta.
        """
        process = self._worker.process
        return 0 if process is None else fresh_pages(process.pid)

    @property
    def import_error(self) -> str | None:
        """Why the lab does not import, once that is known (None while it imports or has not been tried)."""
        return self._worker.import_error

    def close(self) -> None:
        self._worker.stop()

    def __repr__(self) -> str:
        return f"<lab-{self._number} in the grading sandbox>"


_workers: list[Worker] = []


def open_lab(number: str, chosen: Path, impl_of: Any, lab_numbers: list[str], reference_of: Any,
             load_reference: Any, stages: tuple[str, ...] = (), warm: tuple[str, ...] = ()) -> RemoteLab:
    """The sandboxed lab ``number`` whose file is ``chosen``; ``stages``: the labs it composes by the spec;
    ``warm``: tokenizer families its tests hand over, which its child loads as it starts (started now, except in a
    pytest-xdist worker).

    The child imports ``chosen``. A stage it composes is a proxy to the reference held here when
    ``LAB_COMPOSE=reference`` asks for it (the autograder: a lab's points depend on its own file
    only) or when that stage's chosen file is the reference; otherwise it is the student's own
    file for that lab, shipped as text. Any other lab it loads is the student's own file or
    nothing: no reference is served that the spec does not compose (lab-03 asking for lab-04's
    would get an answer it did not write).
    ``LAB_SANDBOX_TRUSTED=1`` (the instructor's wrong variants and canaries) ships the reference
    solutions too, since those files are the reference with a change; the stages such a lab composes
    then run in its child as well (a served stage costs two crossings per call). So do they when the
    lab graded is its own reference (``LAB_IMPL=solution``): no student code runs in that child, and its
    stages run beside it as a student's own stages do under ``make grade``.
    """
    trusted = os.environ.get("LAB_SANDBOX_TRUSTED") == "1"
    reference_run = chosen == reference_of(number)  # every file this child imports is a reference
    compose = os.environ.get("LAB_COMPOSE", "own")
    sources = {number: _source(chosen)}
    served: set[str] = set()
    references: dict[str, list[str]] = {}
    for other in lab_numbers:
        reference = reference_of(other)
        if trusted and reference is not None:
            references[other] = _source(reference)
        if other == number:
            continue
        path = impl_of(other)
        own = path is not None and path != reference
        if other in stages and reference is not None and (compose == "reference" or not own):
            if trusted or reference_run:  # no student code runs beside it: the stage runs in the child, no crossing
                sources[other] = references.get(other) or _source(reference)
            else:
                served.add(other)
        elif own:
            sources[other] = _source(path)
    worker = Worker(number, sources, references, served, trusted, load_reference, warm)
    _workers.append(worker)
    # Under pytest-xdist every worker collects every lab but runs only some: there the child starts when the lab is
    # first called (it still loads its families before it answers "ready", so no call's budget pays for them).
    if warm and not os.environ.get("PYTEST_XDIST_WORKER"):
        worker.start()
    return RemoteLab(number, worker)


def _source(path: Path) -> list[str]:
    try:
        shown = str(path.relative_to(Path.cwd()))
    except ValueError:
        shown = str(path)
    return [shown, path.read_text(encoding="utf-8", errors="replace")]


def stop_all() -> None:
    """End every grading child (between two gradings in one process, and at exit)."""
    while _workers:
        _workers.pop().stop()


atexit.register(stop_all)


def missing_lab(number: str, why: str) -> RemoteLab:
    """A lab whose file is not there: every test of it fails saying so, and no other lab is touched."""
    worker = Worker(number, {}, {}, set(), False)
    worker.import_error = f"lab-{number} has no file to grade: {why}"
    return RemoteLab(number, worker)


def call_costs() -> dict[str, dict[str, Any]]:
    """What the calls of this process's gradings cost, per lab, against the lab's budget."""
    return costs.call_costs(_workers)


def begin_test() -> None:
    """A test begins: nothing that ran out or was received before it is its."""
    for worker in _workers:
        worker.timed_out = None
        worker.begin_test()


def renew_after_timeout(again: bool) -> None:
    """A test's call ran out: give each lab that ran out a fresh child before the test runs once more.

    ``again``: it ran out in the retry too, so the code does hang there; that call is not retried again.
    """
    for worker in _workers:
        if worker.timed_out is not None:
            if again:
                worker.confirmed.add(worker.timed_out)
            worker.fresh()
