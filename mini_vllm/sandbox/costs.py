"""What graded calls cost, as the trusted side measures them: CPU per call and bytes per test (results.json's
call_costs), and the memory a child holds, read from ``/proc`` (never asked of the child)."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any

from mini_vllm.sandbox import budget as budgets
from mini_vllm.sandbox.budget import call_budget


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


def costs_of(number: str) -> CallCosts:
    """Lab ``number``'s account (made on first use)."""
    return _costs.setdefault(number, CallCosts())


def reset_costs() -> None:
    _costs.clear()


def call_costs(workers: list[Any]) -> dict[str, dict[str, Any]]:
    """What the calls of this process's gradings cost, per lab, against the lab's budget."""
    for worker in workers:  # the test running last has not been followed by another's begin_test
        if worker.test_bytes or worker.test_served_s:
            costs_of(worker.number).saw_test(worker.test_bytes, worker.test_served_s)
    return {f"lab-{number}": {"calls": cost.calls, "slowest_call": cost.slowest or None,
                              "slowest_cpu_s": round(cost.slowest_cpu_s, 3),
                              "budget_cpu_s": call_budget(number).cpu_s,
                              "largest_message_bytes": cost.largest_message,
                              "most_bytes_in_a_test": cost.most_bytes_in_a_test,
                              "most_served_cpu_s_in_a_test": round(cost.most_served_s_in_a_test, 3),
                              "cpu_measured": budgets.measurable()}
            for number, cost in sorted(_costs.items())}


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


def fresh_pages(root: int) -> int:
    """Pages the kernel has handed the process ``root`` and its descendants fresh, as it counts them.

    Each one's minor faults (``minflt`` in ``/proc/<pid>/stat``) and those of the children it reaped
    (``cminflt``): a page touched for the first time since it was mapped. Read here from ``/proc``, never
    asked of the child. It counts work no answer shows: lab-07's child allocates every block of 64 KiB or
    more as a fresh mapping (``ALLOCATOR_ENV`` in the policy), so a formatter that copies its whole item on
    every delta touches that many fresh pages each time.
    """
    total, pending, seen = 0, [root], set()
    while pending:
        pid = pending.pop()
        if pid in seen:
            continue
        seen.add(pid)
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = Path(f"/proc/{pid}/stat").read_bytes().rpartition(b")")[2].split()
            total += int(fields[7]) + int(fields[8])  # minflt, cminflt (fields 10 and 11 of proc(5))
        with contextlib.suppress(OSError):
            for task in os.listdir(f"/proc/{pid}/task"):
                with contextlib.suppress(OSError, ValueError):
                    pending += [int(c) for c in Path(f"/proc/{pid}/task/{task}/children").read_text().split()]
    return total
