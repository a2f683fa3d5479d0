"""One grading child's life, on the trusted side: started, set up, called under budgets, stopped and replaced.

A :class:`Worker` grades one lab in one child process (started inside its walls, :mod:`.isolation`), and starts
a fresh one after a call ran out, the child died or a test is retried, so a crash costs the test it happened in.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from typing import Any

from mini_vllm.sandbox import budget as budgets
from mini_vllm.sandbox import isolation
from mini_vllm.sandbox.budget import Budget, Meter, call_budget
from mini_vllm.sandbox.costs import costs_of, memory_held
from mini_vllm.sandbox.failures import (
    CallInterrupted,
    CallTimeout,
    ChildDied,
    LabDoesNotImport,
    SandboxFailure,
    TooMuchData,
)
from mini_vllm.sandbox.parent import ParentPeer
from mini_vllm.sandbox.peer import CallTimedOut, ChannelClosed, ServingStopped
from mini_vllm.sandbox.policy import (
    ALLOCATOR_ENV,
    DEATHS_PER_NAME,
    OUTPUT_KEPT,
    OUTPUT_PER_TEST,
    PER_BATCHED_CALL_S,
    SETUP_BUDGET_S,
    TIMEOUTS_PER_LAB,
)
from mini_vllm.sandbox.wire import ForeignError, WireError

# The calls a grading process makes before any test, as a student reads them in a budget's message.
STARTING = {"__setup__": "importing your file", "__ready__": "starting the grading process"}


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
        self.stopped_at: Budget | None = None  # the budget it was stopped at (more, when it first built a tokenizer)
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
        env.update(ALLOCATOR_ENV.get(self.number, {}))
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
        self.overrun = self.stopped_at = None
        try:
            result = exchange(budget)
        except CallTimedOut as stopped:
            if not isinstance(stopped, CallInterrupted):  # it did not even answer the interrupt: end it
                self.stop()
            self.timed_out = label
            self.timeouts += 1
            # A retry is for a fluke: once a call of this lab ran out twice in a row, its code does hang.
            raise CallTimeout(self._ran_out(label, budget, self.stopped_at or budget), label=label,
                              retry=not self.confirmed) from None
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
            cost = costs_of(self.number)
            cost.add(label, self.last_cpu_s)
            if self.peer is not None:
                cost.largest_message = max(cost.largest_message, self.peer.largest_message)
        return result

    def _ran_out(self, label: str, own: Budget, budget: Budget) -> str:
        """Why a call was stopped. ``budget`` is what it was stopped at: its ``own``, plus the allowance for
        building a tokenizer the grading process had not built yet when the call handed it one."""
        cpu = self.overrun if self.overrun is not None else budget.cpu_s
        call = STARTING.get(label, label)
        if budget.cpu_s > own.cpu_s:
            allowed = (f"its budget of {own.cpu_s:g} s plus {budget.cpu_s - own.cpu_s:g} s for building a tokenizer "
                       "it was handed for the first time")
        else:
            allowed = f"its budget of {own.cpu_s:g} s"
        if cpu > budget.cpu_s:
            spent = f"stopped after {cpu:.3g} s of CPU: {call} used more than {allowed}"
        else:
            spent = (f"stopped after {budget.wall_s:g} s: {call} did not return, using {cpu:.2g} s of CPU (it sleeps "
                     "or waits for something that never comes)")
        return (f"{spent}; your code was stopped there (budgets count the CPU your code uses, so a busy "
                "machine does not change them; the lab goes on in a fresh process)")

    def begin_test(self) -> None:
        if self.test_bytes or self.test_served_s:
            costs_of(self.number).saw_test(self.test_bytes, self.test_served_s)
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


def _exits_soon(process: subprocess.Popen[bytes]) -> bool:
    try:
        process.wait(timeout=1)
        return True
    except subprocess.TimeoutExpired:
        return False
