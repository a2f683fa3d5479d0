"""Fair CPU shares for students graded side by side (``make grade-batch ARGS="--jobs N"``).

Each student's grading runs in a control group of its own with the same weight (cgroup v2
``cpu.weight``, or v1 ``cpu.shares`` where the machine mounts the older hierarchy, as this one
does), so a submission that forks sixty spinners, each in a session of its own, shares one
student's slice of the machine among them: its neighbour keeps its own. (Outside a control
group the kernel's per-session scheduling would give each spinner as much as a whole neighbour.)
When grading ends, whatever is still in the group is killed.

Where no group can be made (an ordinary user without a delegated cgroup, macOS), grading goes on
without: budgets are CPU time (:mod:`mini_vllm.sandbox.budget`), so a neighbour can slow a
student's grading down but not cost it points. :func:`open_shares` says which case holds.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

CGROUP = Path("/sys/fs/cgroup")
V2_WEIGHT = "100"  # every student the same (cgroup v2's default weight)
V1_SHARES = "1024"  # the same in cgroup v1 (its default)


@dataclass(frozen=True)
class Shares:
    """Where the students' groups go (``parent``), in which hierarchy, or why there are none."""

    parent: str | None
    version: int  # 2, 1, or 0 (none)
    why: str

    def describe(self) -> str:
        if self.parent is None:
            return f"fair CPU shares: none ({self.why}); budgets are CPU time, so a neighbour costs time, not points"
        knob = "cpu.weight" if self.version == 2 else "cpu.shares"
        return f"fair CPU shares: a cgroup v{self.version} group per student, equal {knob}"

    def group(self, student: str) -> str | None:
        """A new group for one student's grading (None where there are none)."""
        if self.parent is None:
            return None
        path = Path(self.parent) / student
        try:
            path.mkdir()
            knob, value = ("cpu.weight", V2_WEIGHT) if self.version == 2 else ("cpu.shares", V1_SHARES)
            (path / knob).write_text(value)
        except OSError:
            return None
        return str(path)

    def close(self) -> None:
        if self.parent is not None:
            with contextlib.suppress(OSError):
                Path(self.parent).rmdir()


def _own_group(controller: str) -> str | None:
    """This process's group in the v1 hierarchy holding ``controller`` ("" for v2's), from /proc/self/cgroup."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controllers.split(",") == [controller] or (controller and controller in controllers.split(",")):
            return path
    return None


def open_shares(name: str) -> Shares:
    """A parent group ``name`` for this batch's students, in whichever hierarchy lets this user make one."""
    if not CGROUP.is_dir():
        return Shares(None, 0, "no /sys/fs/cgroup on this machine")
    v2_root = CGROUP if (CGROUP / "cgroup.controllers").exists() else None
    if v2_root is not None and "cpu" in (v2_root / "cgroup.controllers").read_text().split():
        own = _own_group("")
        if own is not None:
            parent = v2_root / own.lstrip("/") / name
            try:
                parent.mkdir()
                (parent / "cgroup.subtree_control").write_text("+cpu")
                return Shares(str(parent), 2, "")
            except OSError as error:
                with contextlib.suppress(OSError):
                    parent.rmdir()
                v2_why = f"cgroup v2: {error.strerror}"
        else:
            v2_why = "cgroup v2: this process's group is unknown"
    else:
        v2_why = "no cgroup v2 cpu controller"
    v1 = CGROUP / "cpu"
    own = _own_group("cpu")
    if (v1 / "cpu.shares").exists() and own is not None:
        parent = v1 / own.lstrip("/") / name
        try:
            parent.mkdir()
            return Shares(str(parent), 1, "")
        except OSError as error:
            return Shares(None, 0, f"{v2_why}; cgroup v1: {error.strerror}")
    return Shares(None, 0, f"{v2_why}; no cgroup v1 cpu hierarchy")


def join(group: str | None) -> None:
    """Move the calling process into ``group`` (run in the child before it executes the grading)."""
    if group is not None:
        with contextlib.suppress(OSError):
            Path(group, "cgroup.procs").write_text(str(os.getpid()))


def end(group: str | None) -> None:
    """Kill whatever is still in ``group`` (a spinner that left its session), then remove the group."""
    if group is None:
        return
    procs = Path(group, "cgroup.procs")
    for _ in range(50):
        try:
            pids = [int(p) for p in procs.read_text().split()]
        except OSError:
            return
        if not pids:
            break
        for pid in pids:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.02)
    with contextlib.suppress(OSError):
        Path(group).rmdir()
