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

from mini_vllm.sandbox import budget as budgets
from mini_vllm.sandbox import isolation
from mini_vllm.sandbox.budget import ALARM, Budget, Clock, Meter
from mini_vllm.sandbox.peer import PARENT, CallTimedOut, ChannelClosed, Peer, ServingStopped, StrictLender
from mini_vllm.sandbox.wire import ForeignError, WireError

SETUP_BUDGET_S = 30.0  # CPU seconds to import the submission (and the engine) in a fresh child
FIRST_LOAD_BUDGET_S = 20.0  # added when a call sends a tokenizer family the child has not built yet
PER_BATCHED_CALL_S = 0.01  # each further call of a batch (mini_vllm.sandbox.each): honest ones take microseconds
INTERRUPT_GRACE_S = 0.5
# The calls a grading process makes before any test, as a student reads them in a budget's message.
STARTING = {"__setup__": "importing your file", "__ready__": "starting the grading process"}
TIMEOUTS_PER_LAB = 5  # a lab whose calls ran out this often is not called again in the run (bounds a hang's cost)
DEATHS_PER_NAME = 3  # a name that ended its process this often is not called again in the run
RECORDED_FROM_S = 0.002  # a call that lasted longer (wall) has its CPU time kept (call_costs); not one that
# built a tokenizer family first (that has its own allowance, FIRST_LOAD_BUDGET_S)
OUTPUT_KEPT = 64 * 1024
OUTPUT_PER_TEST = 256 * 1024  # bytes of the child's own printing shown per test; the rest is cut
BYTES_PER_TEST = 256 * 2**20  # bytes the trusted side reads from the child during one test (honest tests: < 20 MiB)
# CPU seconds the trusted side may spend serving graded code's requests (a served decode or step, a reference
# stage it composes) during one test. Each served request also counts against its call's budget, and is stopped
# there; this bounds what many calls of one test add up to.
SERVED_PER_TEST_S = 60.0
SERVE_SLACK_S = 0.05  # a served request is stopped this far past what is left of its budget


class SandboxFailure(BaseException):
    """Graded code did something that ends the call: it hung, it killed its process, it does not import.

    A BaseException, so neither a test's ``except Exception`` nor hypothesis (which would shrink
    a timeout by timing out again, many times) swallows it: the test fails at once, with this message.
    """


class CallTimeout(SandboxFailure):
    """A call ran out of its budget. ``retry``: whether its test may run once more in a fresh child."""

    def __init__(self, message: str, label: str = "", retry: bool = True) -> None:
        super().__init__(message)
        self.label = label
        self.retry = retry


class CallInterrupted(CallTimedOut):
    """Over budget, and stopped by the interrupt: the child answered, so it may go on serving."""


class ChildDied(SandboxFailure):
    pass


class TooMuchData(WireError):
    """The child sent more than one test may receive."""


class LabDoesNotImport(SandboxFailure):
    pass


def call_budget(number: str) -> Budget:
    """Lab ``number``'s budget for one call (grading.toml; ``LAB_CALL_BUDGET_S`` overrides every lab's)."""
    return Budget.of(budgets.cpu_budget_s(number))


class CallCosts:
    """Per lab: how many calls crossed, and the one that used the most CPU (results.json shows both)."""

    def __init__(self) -> None:
        self.calls = 0
        self.slowest_cpu_s = 0.0
        self.slowest = ""
        self.largest_message = 0  # bytes
        self.most_bytes_in_a_test = 0
        self.most_served_s_in_a_test = 0.0  # CPU seconds the trusted side spent serving the child, in one test

    def saw_test(self, received: int, served_s: float) -> None:
        self.most_bytes_in_a_test = max(self.most_bytes_in_a_test, received)
        self.most_served_s_in_a_test = max(self.most_served_s_in_a_test, served_s)

    def add(self, label: str, cpu_s: float | None) -> None:
        self.calls += 1
        if cpu_s is not None and cpu_s > self.slowest_cpu_s:
            self.slowest_cpu_s, self.slowest = cpu_s, label


_costs: dict[str, CallCosts] = {}


def reset_costs() -> None:
    _costs.clear()


def call_costs() -> dict[str, dict[str, Any]]:
    """What the calls of this process's gradings cost, per lab, against the lab's budget."""
    for worker in _workers:  # the test running last has not been followed by another's begin_test
        if worker.test_bytes or worker.test_served_s:
            _costs.setdefault(worker.number, CallCosts()).saw_test(worker.test_bytes, worker.test_served_s)
    return {f"lab-{number}": {"calls": cost.calls, "slowest_call": cost.slowest or None,
                              "slowest_cpu_s": round(cost.slowest_cpu_s, 3),
                              "budget_cpu_s": call_budget(number).cpu_s,
                              "largest_message_bytes": cost.largest_message,
                              "most_bytes_in_a_test": cost.most_bytes_in_a_test,
                              "most_served_cpu_s_in_a_test": round(cost.most_served_s_in_a_test, 3),
                              "cpu_measured": budgets.measurable()}
            for number, cost in sorted(_costs.items())}


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
        from mini_vllm.tokenizers.families import load_tokenizer_cached

        super().__init__(PARENT, read_fd, write_fd, ReferenceLender(worker), load_tokenizer_cached)
        self.worker = worker
        self._counted = 0  # of received_bytes, what was added to the worker's count for the test
        self._call: tuple[Budget, Clock] | None = None  # the call being waited for: its budget and clock
        self._serving = False  # a request of the child's is being served (requests can nest)

    def request(self, op: str, *args: Any) -> Any:
        label = self.worker.label_of(op, args)
        calls = len(args[2]) if op == "map" else 1
        return self.worker.timed(label, lambda budget: self._timed_exchange(op, args, budget), calls)

    def receive(self, deadline: float | None) -> list[Any]:
        """One message, counted against what one test may receive (a flood fails the test, not the grader)."""
        message = super().receive(deadline)
        worker = self.worker
        worker.test_bytes += self.received_bytes - self._counted
        self._counted = self.received_bytes
        if worker.test_bytes > BYTES_PER_TEST:
            self.closed = True
            raise TooMuchData(f"your code sent the tests more than {BYTES_PER_TEST // 2**20} MiB during this test")
        return message

    def _timed_exchange(self, op: str, args: tuple[Any, ...], budget: Budget) -> Any:
        with self._lock:
            if self.closed:
                raise ChannelClosed("the channel is closed")
            meter = self.worker.meter
            if meter is not None:
                meter.start()
            clock = Clock(meter)
            families = len(self.codec.families_sent)
            number = self._send_request(op, args)
            first_load = len(self.codec.families_sent) > families
            if first_load:  # the child builds a tokenizer it has not built yet: that is not the call's cost
                budget = budget.plus(FIRST_LOAD_BUDGET_S)
            deadline = clock.started + budgets.SLICE_S
            outer, self._call = self._call, (budget, clock)
            try:
                return self._wait(number, budget, clock, deadline, first_load)
            finally:
                self._call = outer

    def _wait(self, number: int, budget: Budget, clock: Clock, deadline: float, first_load: bool) -> Any:
        looks = 0
        interrupted = False
        while True:
            try:
                result = self._await(number, deadline)
            except CallTimedOut:
                if interrupted:
                    raise
                looks += 1
                cpu = self._cpu_used(clock, rescan=looks % 5 == 1)
                if cpu <= budget.cpu_s and clock.wall_s() <= budget.wall_s:
                    deadline = time.monotonic() + budgets.SLICE_S  # within budget: keep waiting
                    continue
                self.worker.overrun = cpu
                interrupted = True  # ask the child to stop the call; kill it if it does not
                self.worker.interrupt()
                deadline = time.monotonic() + INTERRUPT_GRACE_S
                continue
            except ServingStopped:  # the child waits for a reply that will not come: it is ended, not interrupted
                raise
            except BaseException:
                if interrupted:
                    raise CallInterrupted() from None
                raise
            if interrupted:
                raise CallInterrupted()
            slow = time.monotonic() - clock.started > RECORDED_FROM_S and not first_load
            self.worker.last_cpu_s = self._cpu_used(clock, rescan=False) if slow else None
            return result

    def serve(self, message: list[Any]) -> None:
        """Serve one request of the child's, under what is left of its call's budget and of the test's bound.

        The CPU this thread spends serving counts against the call (``Clock.served_s``), and an alarm
        (:class:`~mini_vllm.sandbox.budget.CpuAlarm`) stops a request that would outlast what is left,
        so the trusted side never works for graded code without a budget, however large the request.
        """
        if self._serving:  # a request made while serving another: the outer one's alarm and count cover it
            super().serve(message)
            return
        worker = self.worker
        left, whole_test = SERVED_PER_TEST_S - worker.test_served_s, True
        if self._call is not None:
            budget, clock = self._call
            for_call = budget.cpu_s - self._cpu_used(clock, rescan=False)
            if for_call < left:
                left, whole_test = for_call, False
        if left <= 0:
            raise ServingStopped(self._stopped(whole_test), whole_test)
        self._serving = True
        started = time.thread_time()
        armed = ALARM.arm(left + SERVE_SLACK_S, lambda: ServingStopped(self._stopped(whole_test), whole_test))
        try:
            super().serve(message)
        finally:
            if armed:
                ALARM.disarm()
            self._serving = False
            worker.test_served_s += time.thread_time() - started
        if worker.test_served_s > SERVED_PER_TEST_S:
            raise ServingStopped(self._stopped(True), True)

    def _stopped(self, whole_test: bool) -> str:
        if whole_test:
            return (f"your code had the tests' side serve it (a served decode or step, a reference stage) for more "
                    f"than {SERVED_PER_TEST_S:g} s of CPU in this test")
        return "used more than its budget of CPU time, counting what the tests' side spent serving its requests"

    def _cpu_used(self, clock: Clock, rescan: bool) -> float:
        """CPU seconds of the call so far: the child's tree, and this thread serving it (wall time where unmeasured)."""
        meter = self.worker.meter
        child = meter.used_s(rescan) if meter is not None else time.monotonic() - clock.started
        return child + clock.served_s()


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
                 served: set[str], trusted: bool, load_reference: Any = None, warm: tuple[str, ...] = ()) -> None:
        self.number = number
        self.warm = warm  # tokenizer families the child loads as it starts, before anything is asked of it
        self.load_reference = load_reference  # lab number -> the reference module, loaded here (mini_vllm.labs)
        self.sources = sources  # lab number -> [the path the student knows, the text]: what the child imports
        self.references = references  # the same for reference solutions, shipped to trusted (instructor) code only
        self.served = served  # labs the child gets as proxies to the trusted side's reference
        self.trusted = trusted
        self.process: subprocess.Popen[bytes] | None = None
        self.peer: ParentPeer | None = None
        self.set_up = False  # the child answered ready and imported the submission
        self.control_fd = -1
        self.import_error: str | None = None
        self.deaths: dict[str, int] = {}  # per name: how often a call of it ended its process
        self.meter: Meter | None = None  # the child's CPU time, read from /proc
        self.overrun: float | None = None  # CPU seconds of the call that ran out, when it was stopped
        self.last_cpu_s: float | None = None  # CPU seconds of the last call, when it lasted long enough to read
        self.timed_out: str | None = None  # the call that ran out since the test began: the retry needs a fresh child
        self.confirmed: set[str] = set()  # calls that ran out in a test and again in its retry
        self.timeouts = 0  # calls of this lab that ran out, in the whole run
        self.test_bytes = 0  # read from the child since the test began
        self.test_served_s = 0.0  # CPU seconds the trusted side spent serving the child since the test began
        self.test_output = 0  # of the child's printing, shown since the test began
        self.output: deque[bytes] = deque()
        self.output_size = 0
        self._output_lock = threading.Lock()
        self._start_lock = threading.RLock()
        self.scratch: str | None = None
        self.uid: int | None = None
        self.memory_at_start = 0  # what the child held before the submission was imported (memory_held, bytes)

    # ------------------------------------------------------------------ life

    def start(self) -> None:
        """Spawn the child now, without waiting for it: it loads its ``warm`` families while this side works on."""
        with self._start_lock:
            if self.process is None and self.import_error is None:
                self._spawn()

    def ensure(self) -> ParentPeer:
        with self._start_lock:
            if self.import_error is not None:
                raise LabDoesNotImport(self.import_error)
            alive = self.peer is not None and not self.peer.closed and self.process and self.process.poll() is None
            if alive and self.set_up:
                assert self.peer is not None
                return self.peer
            if not alive:  # never started, or ended: a fresh one (a child started early is still fresh)
                self.stop()
                self._spawn()
            assert self.peer is not None
            try:
                self.peer.request("call_path", ["__ready__"], [], {})
                self.memory_at_start = memory_held(self.process.pid) if self.process else 0
                env = {k: v for k, v in os.environ.items() if k.startswith(("HYPOTHESIS", "LAB_IMPL"))}
                self.peer.request("call_path", ["__setup__"],
                                  [self.number, self.sources, self.references, sorted(self.served),
                                   env], {})
                if self.meter is not None:
                    self.meter.used_s(rescan=True)  # every process of the child known before the calls begin
                self.set_up = True
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
            "warm": list(self.warm),
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
        self.meter = Meter(self.process.pid, self.uid) if budgets.measurable() else None
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
        self.set_up = False
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
        if self.meter is not None:
            self.meter.close()
            self.meter = None
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

    def budget_for(self, label: str, calls: int = 1) -> Budget:
        """What one request may spend: the lab's budget per call, plus a little per call for a batch of many.

        The same for every call of the run: a call that ran out before gets no less the next time.
        """
        if label in ("__setup__", "__ready__"):
            return Budget.of(SETUP_BUDGET_S)
        return call_budget(self.number).plus(PER_BATCHED_CALL_S * (calls - 1))

    def timed(self, label: str, exchange: Any, calls: int = 1) -> Any:
        if self.deaths.get(label, 0) >= DEATHS_PER_NAME:
            raise ChildDied(f"{label} ended the grading process {DEATHS_PER_NAME} times already, so it is not "
                            "called again in this run (each crash costs a fresh process; fix it first)")
        budget = self.budget_for(label, calls)
        if self.timeouts >= TIMEOUTS_PER_LAB and label not in ("__setup__", "__ready__"):  # a fresh child may start
            raise CallTimeout(f"lab-{self.number}'s code ran out of its budget {self.timeouts} times in this run, so "
                              f"{label} is not called again (each time costs up to {budget.wall_s:g} s; fix the "
                              "first one)", label=label, retry=False)
        self.overrun = None
        try:
            result = exchange(budget)
        except CallTimedOut as stopped:
            if not isinstance(stopped, CallInterrupted):  # it did not even answer the interrupt: end it
                self.stop()
            self.timed_out = label
            self.timeouts += 1
            # A retry is for a fluke: once a call of this lab ran out twice in a row, its code does hang.
            raise CallTimeout(self._ran_out(label, budget), label=label, retry=not self.confirmed) from None
        except ChannelClosed:
            self.deaths[label] = self.deaths.get(label, 0) + 1
            process = self.process
            code = process.wait(timeout=1) if process and _exits_soon(process) else None
            time.sleep(0.05)  # its last words are still on their way through the output pipe
            last = [line for line in self.take_output().splitlines() if line.strip()][-6:]
            self.stop()
            said = ("; its last output (quoted):\n" + "\n".join(f"  | {line}" for line in last)) if last else ""
            raise ChildDied(f"the grading process running your code ended during {label}"
                            f"{f' (exit status {code})' if code is not None else ''}: code must return, "
                            f"not exit or crash (the lab goes on in a fresh process){said}") from None
        except TooMuchData as error:
            self.stop()
            raise ChildDied(f"{label}: {error} (the lab goes on in a fresh process)") from None
        except ServingStopped as stopped:
            self.stop()  # it waits for a reply that will not come
            if stopped.whole_test:
                raise ChildDied(f"{label}: {stopped}; it was stopped there (the lab goes on in a fresh process)") \
                    from None
            self.timed_out = label
            self.timeouts += 1
            raise CallTimeout(f"{label} {stopped}: your code was stopped there (the lab goes on in a fresh process)",
                              label=label, retry=not self.confirmed) from None
        except WireError as error:
            self.stop()
            raise ChildDied(f"{label}: your code sent back something that is not a value: {error}") from None
        finally:
            if self.output_size:
                self._show_output()
        if label not in ("__setup__", "__ready__"):  # starting has its own budget
            cost = _costs.setdefault(self.number, CallCosts())
            cost.add(label, self.last_cpu_s)
            if self.peer is not None:
                cost.largest_message = max(cost.largest_message, self.peer.largest_message)
        return result

    def _ran_out(self, label: str, budget: Budget) -> str:
        cpu = self.overrun if self.overrun is not None else budget.cpu_s
        call = STARTING.get(label, label)
        if cpu > budget.cpu_s:
            spent = f"stopped after {cpu:.3g} s of CPU: {call} used more than its budget of {budget.cpu_s:g} s"
        else:
            spent = (f"stopped after {budget.wall_s:g} s: {call} did not return, using {cpu:.2g} s of CPU (it sleeps "
                     "or waits for something that never comes)")
        return (f"{spent}; your code was stopped there (budgets count the CPU your code uses, so a busy "
                "machine does not change them; the lab goes on in a fresh process)")

    def begin_test(self) -> None:
        if self.test_bytes or self.test_served_s:
            _costs.setdefault(self.number, CallCosts()).saw_test(self.test_bytes, self.test_served_s)
        self.test_bytes = self.test_output = 0
        self.test_served_s = 0.0

    def _show_output(self) -> None:
        """What the child printed, up to a bound per test (pytest keeps a test's output in memory)."""
        text = self.take_output()
        room = OUTPUT_PER_TEST - self.test_output
        if room > 0:
            shown = text[:room]
            self.test_output += len(shown)
            sys.stdout.write(shown)
            if len(shown) < len(text):
                self.test_output = OUTPUT_PER_TEST
                sys.stdout.write(f"\n[the rest of your code's output in this test is cut: over "
                                 f"{OUTPUT_PER_TEST // 1024} KiB]\n")

    def fresh(self) -> None:
        """Before a test runs again: a new process, as if this lab's grading had just begun."""
        self.timed_out = None
        self.stop()


def memory_held(root: int) -> int:
    """Bytes of memory the process ``root`` and its descendants hold, as the kernel reports them.

    Their anonymous and shared pages (``RssAnon``, ``RssShmem``: what a heap or a shared mapping
    touched), the files in their own ``/tmp`` (a tmpfs: memory too, and one a process can write to
    keep pages out of its own figures) and any memory file one holds open (``memfd_create``). Read
    here from ``/proc``, never asked of the child.
    """
    total, pending, seen = 0, [root], set()
    devices: set[int] = set()
    files: set[tuple[int, int]] = set()
    host_tmp = os.stat("/tmp").st_dev
    while pending:
        pid = pending.pop()
        if pid in seen:
            continue
        seen.add(pid)
        with contextlib.suppress(OSError, ValueError):
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith(("RssAnon:", "RssShmem:")):
                    total += int(line.split()[1]) * 1024
        with contextlib.suppress(OSError):  # a /tmp of its own (bubblewrap's), not the host's seen again
            scratch = f"/proc/{pid}/root/tmp"
            device = os.stat(scratch).st_dev
            if device != host_tmp and device not in devices:
                devices.add(device)
                used = os.statvfs(scratch)
                total += (used.f_blocks - used.f_bfree) * used.f_frsize
        with contextlib.suppress(OSError):
            for fd in os.listdir(f"/proc/{pid}/fd"):
                with contextlib.suppress(OSError):
                    if os.readlink(f"/proc/{pid}/fd/{fd}").startswith("/memfd:"):
                        found = os.stat(f"/proc/{pid}/fd/{fd}")
                        if (found.st_dev, found.st_ino) not in files:
                            files.add((found.st_dev, found.st_ino))
                            total += found.st_blocks * 512
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
