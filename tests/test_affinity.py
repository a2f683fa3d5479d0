"""`make grade`'s two workers each keep to a CPU of their own, and a lab's child shares its worker's
(mini_vllm/sandbox/affinity.py): a crossing then wakes a process on the same CPU."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from mini_vllm.sandbox.affinity import grading_slot, keep_to_one_cpu

CPUS = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
needs_two = pytest.mark.skipif(len(CPUS) < 2, reason="pinning is for machines with two CPUs or more")

# Run in a process of its own, so the test's process keeps every CPU.
PIN_AND_START_A_CHILD = """
import json, os, subprocess, sys
from mini_vllm.sandbox.affinity import keep_to_one_cpu
cpu = keep_to_one_cpu(int(sys.argv[1]), int(sys.argv[2]))
child = subprocess.run([sys.executable, "-c", "import os; print(sorted(os.sched_getaffinity(0)))"],
                       capture_output=True, text=True, check=True).stdout
print(json.dumps({"cpu": cpu, "own": sorted(os.sched_getaffinity(0)), "child": json.loads(child)}))
"""


def pinned(worker: int, workers: int) -> dict[str, object]:
    done = subprocess.run([sys.executable, "-c", PIN_AND_START_A_CHILD, str(worker), str(workers)],
                          capture_output=True, text=True, check=True)
    return dict(json.loads(done.stdout))


@needs_two
def test_each_worker_keeps_to_a_cpu_of_its_own_and_its_child_shares_it() -> None:
    first, second = pinned(0, 2), pinned(1, 2)
    assert first == {"cpu": CPUS[0], "own": [CPUS[0]], "child": [CPUS[0]]}, first
    assert second == {"cpu": CPUS[1], "own": [CPUS[1]], "child": [CPUS[1]]}, (
        f"the second worker takes the second CPU, so two labs never share one: {second}")


@needs_two
def test_a_worker_that_would_crowd_another_is_left_where_it_is() -> None:
    for worker, workers in ((0, 1), (0, len(CPUS) + 1), (len(CPUS), len(CPUS))):
        left = pinned(worker, workers)
        assert left == {"cpu": None, "own": CPUS, "child": CPUS}, (
            f"worker {worker} of {workers} on {len(CPUS)} CPUs: a lone process, or more workers than CPUs, keeps "
            f"every CPU it had: {left}")


def test_without_pinning_nothing_changes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(os, "sched_setaffinity", raising=False)
    assert keep_to_one_cpu(0, 2) is None, "macOS has no sched_setaffinity: the worker runs where the OS puts it"


def test_only_a_graded_runs_workers_are_pinned() -> None:
    worker = {"workerid": "gw1", "workercount": 2}
    assert grading_slot({"LAB_SANDBOX": "1"}, worker) == (1, 2), "make grade's second worker takes slot 1 of 2"
    for environ in ({}, {"LAB_SANDBOX": "auto"}, {"LAB_SANDBOX": "0"}):
        assert grading_slot(environ, worker) is None, (
            f"{environ}: the course's own test runs keep every CPU (their tests start burners, gradings and servers "
            "that must run where the OS puts them)")
    assert grading_slot({"LAB_SANDBOX": "1"}, None) is None, "a lone grader (make lab-03, the autograder) is not pinned"
