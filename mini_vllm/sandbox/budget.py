"""What one call into graded code may spend, measured as the kernel measures it.

A busy machine makes a call take longer without making it use more CPU, so a call's budget
is CPU seconds: those of the grading child and of every process below it, as ``/proc/<pid>/stat``
counts them (``utime + stime``, and ``cutime + cstime`` for the children each one has reaped),
plus those the trusted side spends serving the call's callbacks (a lent tokenizer's work is the
call's too). The same code spends the same CPU on a quiet laptop and beside twelve busy
neighbours, so it gets the same verdict.

Code that sleeps or blocks uses no CPU, so a wall ceiling, several times the budget, stops it.
The ceiling does not count the time the child spent waiting for a CPU it was ready to use
(``run_delay`` in ``/proc/<pid>/schedstat``): a crowded machine does not bring it closer.

Each lab's budget is in ``grading.toml`` (``call_budget_s`` of ``[labs.lab-NN]``, else the
top-level one); ``LAB_CALL_BUDGET_S`` overrides every lab's (the grader's own tests use it).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from mini_vllm.sandbox.policy import GRADER_MEMORY, SLICE_S, WALL_FACTOR, configure, cpu_budget_s

__all__ = ["SLICE_S", "configure", "cpu_budget_s"]  # grading.toml's budgets are set and read through the policy

TICK_S = 1.0 / os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 0.01
PROC = "/proc"


@dataclass(frozen=True)
class Budget:
    """CPU seconds one call may use, and the wall seconds (less time spent waiting for a CPU) it may last."""

    cpu_s: float
    wall_s: float

    @classmethod
    def of(cls, cpu_s: float) -> Budget:
        return cls(cpu_s, cpu_s * WALL_FACTOR)

    def plus(self, cpu_s: float) -> Budget:
        return Budget.of(self.cpu_s + cpu_s)


def call_budget(number: str) -> Budget:
    """Lab ``number``'s budget for one call (grading.toml; ``LAB_CALL_BUDGET_S`` overrides every lab's)."""
    return Budget.of(cpu_budget_s(number))


def cap_own_memory(limit: int = GRADER_MEMORY) -> None:
    """Cap this (trusted) process's heap where the OS allows; the hard limit stays, so children set their own."""
    try:
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
        if soft == resource.RLIM_INFINITY or soft > limit:
            resource.setrlimit(resource.RLIMIT_DATA, (min(limit, hard) if hard != resource.RLIM_INFINITY
                                                      else limit, hard))
    except (ImportError, ValueError, OSError):  # not on this OS: the bounds on what crosses still hold
        pass


def measurable() -> bool:
    """Whether this machine reports a process's CPU time in /proc (Linux); elsewhere the budget is wall time."""
    return os.path.exists(f"{PROC}/self/stat")


def _stat_fields(data: bytes) -> list[bytes]:
    return data.rpartition(b")")[2].split()  # after the command name, which may hold spaces and parentheses


def _cpu_ticks(fields: list[bytes]) -> int:
    # Fields 14-17 of proc(5): utime, stime, cutime, cstime (0-based 11-14 after the name).
    return int(fields[11]) + int(fields[12]) + int(fields[13]) + int(fields[14])


def _read(path: str) -> bytes | None:
    try:
        with open(path, "rb", buffering=0) as handle:
            return handle.read(4096)
    except OSError:
        return None


def run_delay_s(pid: int | str) -> float:
    """Seconds the thread ``pid`` has spent ready to run but waiting for a CPU (0 where unknown)."""
    data = _read(f"{PROC}/{pid}/schedstat")
    try:
        return int(data.split()[1]) / 1e9 if data else 0.0
    except (IndexError, ValueError):
        return 0.0


class Meter:
    """The CPU seconds used by a process tree since :meth:`start`, read from /proc.

    The tree is the process the grader started and everything below it, found by parent links,
    plus every process of the child's own user id (a grandchild that left the tree by
    ``setsid`` and a double fork is still that user's). Each process's count only grows, so
    what a call used is the sum of each one's growth since the call began; a process first
    seen during the call counts whole (it was born during it, or ran unseen before).
    """

    def __init__(self, root: int, uid: int | None) -> None:
        self.root = root
        self.uid = uid
        self._handles: dict[int, int] = {}  # pid -> an open /proc/<pid>/stat, read again with pread
        self._seen: dict[int, int] = {}  # pid -> its ticks at the last reading
        self.main: int | None = None  # the Python process serving the calls (for its run_delay)
        self.used_ticks = 0
        self._read_at = 0.0  # time.monotonic() of the last reading
        self._rescan()

    def close(self) -> None:
        for handle in self._handles.values():
            with contextlib.suppress(OSError):
                os.close(handle)
        self._handles.clear()

    def start(self) -> None:
        """A call begins: what the known processes used so far is not its."""
        self.used_ticks = 0
        self._read_known()
        self.used_ticks = 0

    def used_s(self, rescan: bool = True) -> float:
        """CPU seconds the tree used since :meth:`start` (``rescan``: look for new processes first).

        The kernel's counts move in whole ticks (10 ms): a reading less than a tick old is given again rather than
        made again. A served decode asks before each callback, tens of thousands of times in a cost test.
        """
        if rescan:
            self._rescan()
        elif time.monotonic() - self._read_at < TICK_S:
            return self.used_ticks * TICK_S
        self._read_known()
        return self.used_ticks * TICK_S

    def _read_known(self) -> None:
        self._read_at = time.monotonic()
        for pid, handle in list(self._handles.items()):
            try:
                data = os.pread(handle, 4096, 0)
            except OSError:
                data = b""
            if not data:  # gone (reaped): its time is in its parent's cutime, or lost with it
                self._forget(pid)
                continue
            ticks = _cpu_ticks(_stat_fields(data))
            before = self._seen.get(pid)
            self.used_ticks += ticks - before if before is not None else ticks
            self._seen[pid] = ticks

    def _forget(self, pid: int) -> None:
        handle = self._handles.pop(pid, None)
        if handle is not None:
            with contextlib.suppress(OSError):
                os.close(handle)
        self._seen.pop(pid, None)

    def _rescan(self) -> None:
        """Open the stat file of each process of the tree not yet known."""
        parents: dict[int, int] = {}
        owners: set[int] = set()
        try:
            names = os.listdir(PROC)
        except OSError:
            return
        for name in names:
            if not name.isdigit():
                continue
            data = _read(f"{PROC}/{name}/stat")
            if not data:
                continue
            fields = _stat_fields(data)
            try:
                parents[int(name)] = int(fields[1])
            except (IndexError, ValueError):
                continue
            if self.uid is not None:
                with contextlib.suppress(OSError):
                    if os.stat(f"{PROC}/{name}").st_uid == self.uid:
                        owners.add(int(name))
        depth = {self.root: 0} if self.root in parents else {}
        grew = True
        while grew:
            grew = False
            for pid, parent in parents.items():
                if parent in depth and pid not in depth:
                    depth[pid] = depth[parent] + 1
                    grew = True
        # The Python process serving the calls, for its wait for a CPU: the outermost one of the tree
        # started as this interpreter (unshare or bwrap above it are other programs; its forks are deeper).
        if self.main is None or self.main not in depth:
            python = os.fsencode(sys.executable)
            serving = [pid for pid in depth if (_read(f"{PROC}/{pid}/cmdline") or b"").split(b"\0")[0] == python]
            self.main = min(serving, key=depth.__getitem__) if serving else None
        # The wrappers above it only wait (read at every call, they would double its cost): left out.
        floor = depth.get(self.main, 0) if self.main is not None else 0
        for pid in [p for p in self._handles if p in depth and depth[p] < floor]:
            self._forget(pid)
        for pid in {p for p in depth if depth[p] >= floor} | owners:
            if pid in self._handles:
                continue
            try:
                self._handles[pid] = os.open(f"{PROC}/{pid}/stat", os.O_RDONLY)
            except OSError:
                continue


class CpuAlarm:
    """Stops what this (trusted) process does for graded code once it has used a number of CPU seconds.

    ``setitimer(ITIMER_PROF)`` counts this process's CPU time; when it runs out, SIGPROF raises the
    armed error in the main thread, wherever that thread is (a served decode, a reference stage run
    for the child), so no single request the trusted side serves can outlast its budget. Python runs
    signal handlers on the main thread only, so it is armed there only (elsewhere a served request is
    bounded by its arguments' sizes and checked when it ends).
    """

    def __init__(self) -> None:
        self._error: Callable[[], BaseException] | None = None
        self._installed = False

    def arm(self, cpu_s: float, error: Callable[[], BaseException]) -> bool:
        if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer"):
            return False
        if not self._installed:
            signal.signal(signal.SIGPROF, self._ring)
            self._installed = True
        self._error = error
        signal.setitimer(signal.ITIMER_PROF, max(cpu_s, 0.001))
        return True

    def disarm(self) -> None:
        self._error = None
        signal.setitimer(signal.ITIMER_PROF, 0)

    def _ring(self, signum: int, frame: object) -> None:
        error, self._error = self._error, None
        if error is not None:
            raise error()


ALARM = CpuAlarm()


class Clock:
    """Wall seconds of one call, less the time the child and the trusted thread waited for a CPU."""

    def __init__(self, meter: Meter | None) -> None:
        self.meter = meter
        self.started = time.monotonic()
        self.own_cpu = time.thread_time()
        self._delays = self._delay_now()

    def _delay_now(self) -> float:
        main = self.meter.main if self.meter is not None else None
        return (run_delay_s(main) if main is not None else 0.0) + run_delay_s("thread-self")

    def wall_s(self) -> float:
        return time.monotonic() - self.started - max(0.0, self._delay_now() - self._delays)

    def served_s(self) -> float:
        """CPU seconds this thread spent during the call (serving the child's callbacks, decoding replies)."""
        return time.thread_time() - self.own_cpu
