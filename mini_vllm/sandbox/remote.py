"""The trusted side of the sandbox: a lab whose code runs in a child process, seen through proxies.

``load_lab("lab-03")`` in a graded run returns a :class:`RemoteLab`. Its attributes are the
lab's names: the given value types and constants come from :mod:`mini_vllm.labtypes` (trusted
copies), every other name is a :class:`RemoteName` whose call runs in the child. The child is
started on first use and started again after it is killed, so a timeout or a crash costs the
test it happened in, not the rest of the lab.

Budgets: a call that does not return within ``LAB_CALL_BUDGET_S`` (``call_budget_s`` in
grading.toml, 5 s) is stopped (SIGINT first, then the process), and its test fails naming the
call. A name that has timed out once, or a lab that has timed out five times, gets a short budget
from then on, and a name that hung or killed its process three times is not called again in the
run, so a submission that hangs or crashes everywhere is graded in minutes, not hours.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from pathlib import Path
from typing import Any

from mini_vllm.sandbox import isolation
from mini_vllm.sandbox.peer import PARENT, CallTimedOut, ChannelClosed, Peer, StrictLender
from mini_vllm.sandbox.wire import ForeignError, WireError

SETUP_BUDGET_S = 30.0  # importing the submission (and the engine) in a fresh child
FIRST_LOAD_BUDGET_S = 20.0  # added when a call sends a tokenizer family the child has not built yet
SHORT_BUDGET_S = 0.25
PER_BATCHED_CALL_S = 0.01  # each further call of a batch (mini_vllm.sandbox.each): honest ones take microseconds
STRIKES_PER_LAB = 5
INTERRUPT_GRACE_S = 0.5
STRIKES_PER_NAME = 3  # a name that hung this often is not called again in the run: its tests fail at once
OUTPUT_KEPT = 64 * 1024


class SandboxFailure(BaseException):
    """Graded code did something that ends the call: it hung, it killed its process, it does not import.

    A BaseException, so neither a test's ``except Exception`` nor hypothesis (which would shrink
    a timeout by timing out again, many times) swallows it: the test fails at once, with this message.
    """


class CallTimeout(SandboxFailure):
    pass


class CallInterrupted(CallTimedOut):
    """Over budget, and stopped by the interrupt: the child answered, so it may go on serving."""


class ChildDied(SandboxFailure):
    pass


class LabDoesNotImport(SandboxFailure):
    pass


def call_budget() -> float:
    return float(os.environ.get("LAB_CALL_BUDGET_S") or 5.0)


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


class ParentPeer(Peer):
    """The trusted end: every request has a budget, and a hang or a death ends the child."""

    def __init__(self, worker: Worker, read_fd: int, write_fd: int) -> None:
        from mini_vllm.families import load_tokenizer_cached

        super().__init__(PARENT, read_fd, write_fd, ReferenceLender(worker), load_tokenizer_cached)
        self.worker = worker

    def request(self, op: str, *args: Any) -> Any:
        label = self.worker.label_of(op, args)
        calls = len(args[2]) if op == "map" else 1
        return self.worker.timed(label, lambda budget: self._timed_exchange(op, args, budget), calls)

    def _timed_exchange(self, op: str, args: tuple[Any, ...], budget: float) -> Any:
        with self._lock:
            if self.closed:
                raise ChannelClosed("the channel is closed")
            families = len(self.codec.families_sent)
            number = self._send_request(op, args)
            if len(self.codec.families_sent) > families:
                budget += FIRST_LOAD_BUDGET_S
            deadline = time.monotonic() + budget
            interrupted = False
            while True:
                try:
                    result = self._await(number, deadline)
                except CallTimedOut:
                    if interrupted:
                        raise
                    interrupted = True  # ask the child to stop the call; kill it if it does not
                    self.worker.interrupt()
                    deadline = time.monotonic() + INTERRUPT_GRACE_S
                    continue
                except BaseException:
                    if interrupted:
                        raise CallInterrupted() from None
                    raise
                if interrupted:
                    raise CallInterrupted()
                return result


class ReferenceLender(StrictLender):
    """What the child may ask of the trusted side: lent objects' public methods, and the reference labs."""

    def __init__(self, worker: Worker) -> None:
        self.worker = worker

    def call_path(self, path: list[str], args: list[Any], kwargs: dict[str, Any]) -> Any:
        if len(path) != 2 or not all(isinstance(p, str) for p in path) or path[0] not in self.worker.served:
            raise PermissionError("the reference labs are not available to graded code")
        number, name = path
        if name.startswith("_"):
            raise PermissionError(f"lab-{number}.{name} is not served to graded code")
        module = self.worker.load_reference(number)
        target = getattr(module, name, None)
        if not callable(target) or getattr(target, "__module__", None) != module.__name__:
            raise AttributeError(f"lab-{number} has no public class or function {name!r}")
        return target(*args, **kwargs)


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


class Worker:
    """One child process grading one lab, and what it takes to start it again."""

    def __init__(self, number: str, sources: dict[str, list[str]], references: dict[str, list[str]],
                 served: set[str], trusted: bool, load_reference: Any = None) -> None:
        self.number = number
        self.load_reference = load_reference  # lab number -> the reference module, loaded here (mini_vllm.labs)
        self.sources = sources  # lab number -> [the path the student knows, the text]: what the child imports
        self.references = references  # the same for reference solutions, shipped to trusted (instructor) code only
        self.served = served  # labs the child gets as proxies to the trusted side's reference
        self.trusted = trusted
        self.process: subprocess.Popen[bytes] | None = None
        self.peer: ParentPeer | None = None
        self.control_fd = -1
        self.import_error: str | None = None
        self.strikes: dict[str, int] = {}
        self.output: deque[bytes] = deque()
        self.output_size = 0
        self._output_lock = threading.Lock()
        self._start_lock = threading.RLock()
        self.scratch: str | None = None
        self.uid: int | None = None

    # ------------------------------------------------------------------ life

    def ensure(self) -> ParentPeer:
        with self._start_lock:
            if self.import_error is not None:
                raise LabDoesNotImport(self.import_error)
            if self.peer is not None and not self.peer.closed and self.process and self.process.poll() is None:
                return self.peer
            self.stop()
            self._spawn()
            assert self.peer is not None
            try:
                env = {k: v for k, v in os.environ.items() if k.startswith(("HYPOTHESIS", "LAB_IMPL"))}
                self.peer.request("call_path", ["__setup__"],
                                  [self.number, self.sources, self.references, sorted(self.served),
                                   env], {})
            except SandboxFailure as failure:
                self.import_error = f"lab-{self.number} does not import: {failure}"
                self.stop()
                raise LabDoesNotImport(self.import_error) from None
            except BaseException as error:  # the submission raised while importing: that is the lab's grade
                kind = "" if isinstance(error, ForeignError) else f"{type(error).__name__}: "
                self.import_error = f"lab-{self.number} does not import: {kind}{error}"
                trace = getattr(error, "sandbox_traceback", "")
                if trace:
                    self.import_error += "\n" + trace
                self.stop()
                raise LabDoesNotImport(self.import_error) from None
            return self.peer

    def _spawn(self) -> None:
        walls = isolation.probe()
        parent_read, child_write = os.pipe()
        child_read, parent_write = os.pipe()
        control_read, control_write = os.pipe()
        repo = str(isolation.REPO)
        self.uid = isolation.fresh_uid() if walls.own_uid else None
        workdir = "/tmp"  # inside bubblewrap: a fresh, empty /tmp of the child's own
        if walls.kind != isolation.BWRAP:  # otherwise a private folder of its own, owned by the child's user
            workdir = self.scratch = tempfile.mkdtemp(prefix="lab-sandbox-")
            if self.uid is not None:
                os.chown(workdir, self.uid, self.uid)
        config = {
            "processes": isolation.counts_own_processes(walls),
            "tag": os.environ.get("LAB_SANDBOX_TAG", ""),  # on the command line: lets a test find its children
            "workdir": workdir,
        }
        python = [sys.executable, "-X", "frozen_modules=off", "-m", "mini_vllm.sandbox.child",
                  str(child_read), str(child_write), str(control_read), json.dumps(config)]
        command = isolation.child_command(walls, python, self.trusted, self.uid)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST", "COV_"))}
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        env["HOME"] = workdir
        if self.trusted:
            env["PYTHONPATH"] = os.pathsep.join(p for p in (repo, env.get("PYTHONPATH", "")) if p)
        self.process = subprocess.Popen(
            command, pass_fds=(child_read, child_write, control_read), stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, start_new_session=True, cwd=repo)
        for fd in (child_read, child_write, control_read):
            os.close(fd)
        self.control_fd = control_write
        self.peer = ParentPeer(self, parent_read, parent_write)
        threading.Thread(target=self._drain, args=(self.process,), daemon=True, name="sandbox-output").start()

    def _drain(self, process: subprocess.Popen[bytes]) -> None:
        stream = process.stdout
        assert stream is not None
        for line in iter(lambda: stream.read1(65536), b""):  # type: ignore[attr-defined]
            with self._output_lock:
                self.output.append(line)
                self.output_size += len(line)
                while self.output_size > OUTPUT_KEPT and len(self.output) > 1:
                    self.output_size -= len(self.output.popleft())

    def take_output(self) -> str:
        with self._output_lock:
            text = b"".join(self.output).decode("utf-8", "replace")
            self.output.clear()
            self.output_size = 0
        return text

    def interrupt(self) -> None:
        with contextlib.suppress(OSError):
            os.write(self.control_fd, b"!")

    def stop(self) -> None:
        process, peer = self.process, self.peer
        self.process = self.peer = None
        if peer is not None:
            peer.closed = True
            for fd in (peer._read_fd, peer._write_fd):
                with contextlib.suppress(OSError):
                    os.close(fd)
        if self.control_fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self.control_fd)
            self.control_fd = -1
        if process is not None and process.poll() is None:
            try:
                os.killpg(process.pid, 9)
            except OSError:
                process.kill()
            process.wait()
        if self.uid is not None:  # and anything it forked that outlived its process group
            isolation.end_every_process_of(self.uid)
            self.uid = None
        if self.scratch:
            shutil.rmtree(self.scratch, ignore_errors=True)
            self.scratch = None

    # ------------------------------------------------------------------ calls

    def label_of(self, op: str, args: tuple[Any, ...]) -> str:
        if op == "call_path":
            return ".".join(args[0])
        if op in ("call", "map") and len(args) > 1 and isinstance(args[1], str):
            return f"{self._class_of(args[0])}.{args[1]}"
        return f"{self._class_of(args[0]) if args else 'an object'} ({op})"

    def _class_of(self, object_id: Any) -> str:
        peer = self.peer
        return peer.class_names.get(object_id, "an object") if peer is not None else "an object"

    def budget_for(self, label: str, calls: int = 1) -> float:
        """Seconds for one request: a call's budget, plus a little per call for a batch of many."""
        if label == "__setup__":
            return SETUP_BUDGET_S
        hung_here = self.strikes.get(label, 0) > 0
        hung_lab = sum(self.strikes.values()) >= STRIKES_PER_LAB
        return (SHORT_BUDGET_S if hung_here or hung_lab else call_budget()) + PER_BATCHED_CALL_S * (calls - 1)

    def timed(self, label: str, exchange: Any, calls: int = 1) -> Any:
        if self.strikes.get(label, 0) >= STRIKES_PER_NAME:
            raise CallTimeout(f"{label} did not return within its budget {STRIKES_PER_NAME} times already, so it "
                              "is not called again in this run (each hang costs seconds; fix the loop first)")
        budget = self.budget_for(label, calls)
        try:
            return exchange(budget)
        except CallTimedOut as stopped:
            self.strikes[label] = self.strikes.get(label, 0) + 1
            if not isinstance(stopped, CallInterrupted):  # it did not even answer the interrupt: end it
                self.stop()
            raise CallTimeout(f"{label} did not return within {budget:g} s: your code was stopped there "
                              f"(the lab goes on in a fresh process)") from None
        except ChannelClosed:
            self.strikes[label] = self.strikes.get(label, 0) + 1
            process = self.process
            code = process.wait(timeout=1) if process and _exits_soon(process) else None
            time.sleep(0.05)  # its last words are still on their way through the output pipe
            last = [line for line in self.take_output().splitlines() if line.strip()][-6:]
            self.stop()
            said = ("; its last output:\n" + "\n".join(last)) if last else ""
            raise ChildDied(f"the grading process running your code ended during {label}"
                            f"{f' (exit status {code})' if code is not None else ''}: code must return, "
                            f"not exit or crash (the lab goes on in a fresh process){said}") from None
        except WireError as error:
            self.stop()
            raise ChildDied(f"{label}: your code sent back something that is not a value: {error}") from None
        finally:
            if self.output_size:
                sys.stdout.write(self.take_output())


def _private_memory(root: int) -> int:
    """The sum of ``RssAnon`` over ``root`` and its descendants (the kernel's own tree and figures)."""
    total, pending, seen = 0, [root], set()
    while pending:
        pid = pending.pop()
        if pid in seen:
            continue
        seen.add(pid)
        with contextlib.suppress(OSError, ValueError):
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("RssAnon:"):
                    total += int(line.split()[1]) * 1024
        with contextlib.suppress(OSError):
            for task in os.listdir(f"/proc/{pid}/task"):
                with contextlib.suppress(OSError, ValueError):
                    pending += [int(c) for c in Path(f"/proc/{pid}/task/{task}/children").read_text().split()]
    return total


def _exits_soon(process: subprocess.Popen[bytes]) -> bool:
    try:
        process.wait(timeout=1)
        return True
    except subprocess.TimeoutExpired:
        return False


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

    def install_probe(self, name: str) -> Any:
        """A probe (:mod:`mini_vllm.sandbox.probes`) installed in the child's copy of the lab."""
        return self.call_path(("__probe__",), [name], {})

    def memory_in_use(self) -> int:
        """Bytes of private memory the child and everything it started hold, as the kernel reports it.

        Read here from ``/proc``, never asked of the child: a test that bounds what graded code keeps
        measures it from outside, where graded code cannot change the figure.
        """
        process = self._worker.process
        return 0 if process is None else _private_memory(process.pid)

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
             load_reference: Any) -> RemoteLab:
    """The sandboxed lab ``number`` whose file is ``chosen``.

    The child imports ``chosen``; every other lab it loads is either the student's own file for
    that lab (shipped as text) or, when that lab's choice is the reference solution or
    ``LAB_COMPOSE=reference`` asks for it, a proxy to the reference held here.
    ``LAB_SANDBOX_TRUSTED=1`` (the instructor's wrong variants and canaries) ships the reference
    solutions too, since those files are the reference with a change.
    """
    trusted = os.environ.get("LAB_SANDBOX_TRUSTED") == "1"
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
        if compose != "reference" and path is not None and path != reference:
            sources[other] = _source(path)
        elif reference is not None:
            served.add(other)
    worker = Worker(number, sources, references, served, trusted, load_reference)
    _workers.append(worker)
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
