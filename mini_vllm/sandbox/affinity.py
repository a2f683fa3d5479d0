"""Where a grader and its child run: on one CPU, since they take turns.

The trusted side and the grading child never compute at the same time: one asks, waits, and the
other answers. Each crossing wakes the other process, and waking a process that sleeps on another CPU
costs an interrupt between CPUs; on a virtual machine that is most of a crossing (a pipe round trip
between two Python processes on the course's 2-core VM: 61 µs across CPUs, 7.6 µs on one). So when
``make grade`` grades two labs at once (pytest-xdist), each worker keeps to a CPU of its own, and the
child it starts inherits it: a lab's two processes share that CPU, and the two labs share none.

Only the CPU a process runs on changes, never what it may use: budgets count CPU time, so a grade is
the same pinned or not. A worker alone on its machine (one CPU, or fewer CPUs than workers) is left
where it is, and so is a lone grader (``make lab-03``, the autograder), which cannot know which CPU
its neighbours use.
"""

from __future__ import annotations

import os


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
