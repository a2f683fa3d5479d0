"""Where a grader and its child run: on one CPU, since they take turns.

The trusted side and the grading child never compute at the same time: one asks, waits, and the
other answers. Each crossing wakes the other process, and waking a process that sleeps on another CPU
costs an interrupt between CPUs; on a virtual machine that is most of a crossing (a pipe round trip
between two Python processes on the course's 2-core VM: 61 µs across CPUs, 7.6 µs on one). So when
``make grade`` grades two labs at once (pytest-xdist), each worker keeps to a CPU of its own, and the
child it starts inherits it: a lab's two processes share that CPU, and the two labs share none.

Only the CPU a process runs on changes, never how much it may use: budgets count CPU time, so a grade
is the same pinned or not. Nothing is pinned where the machine allows fewer CPUs than there are
workers, nor in a lone grader (``make lab-03``, the autograder, an instructor's batch): it cannot know
which CPU its neighbours use, and two processes pinned to one CPU would halve each other's speed.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any


def grading_slot(environ: Mapping[str, str], workerinput: Mapping[str, Any] | None) -> tuple[int, int] | None:
    """(this worker, how many) for a pytest-xdist worker of a graded run (``LAB_SANDBOX=1``: ``make grade``);
    None for anything else. The course's own test runs (its pytest, LAB_SANDBOX=auto) keep every CPU: their
    tests start processes of their own (CPU burners, gradings, servers) that must run where the OS puts them."""
    if environ.get("LAB_SANDBOX") != "1" or workerinput is None:
        return None
    return int(str(workerinput["workerid"]).removeprefix("gw")), int(workerinput["workercount"])


def keep_to_one_cpu(worker: int, workers: int) -> int | None:
    """Pin the calling thread (and every thread and process it starts from now) to CPU slot ``worker``
    of ``workers``; the CPU, or None where that would crowd workers together or the OS cannot pin."""
    if not hasattr(os, "sched_setaffinity"):  # macOS
        return None
    allowed = sorted(os.sched_getaffinity(0))
    if workers < 2 or workers > len(allowed) or not 0 <= worker < workers:
        return None
    cpu = allowed[worker]
    os.sched_setaffinity(0, {cpu})
    return cpu
