"""The mutation-testing tool (``make mutants LAB=NN``) itself: what it mutates, and that its verdicts are real."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from instructor.mutants import (
    IDLE_FRACTION,
    Activity,
    Limit,
    Outcome,
    Plan,
    _in_child,
    limits,
    read_equivalents,
    run,
    verdict,
)
from instructor.mutate import Mutant, mutants
from mini_vllm.labs import lab_dir

SOURCE = '''
"""Docstrings, annotations and error messages are never mutated."""
LIMIT: int = 0xA0


def count_small(values: list[int], limit: int = 3) -> int:
    """How many values are below the limit."""
    total = 0
    for v in values:
        if v < limit and v != LIMIT:
            total += 1
        else:
            break
    if not values:
        raise ValueError("no values")
    return total
'''


def ids(source: str) -> set[str]:
    return {m.id for m in mutants(source)}


def test_each_kind_of_mistake_is_made() -> None:
    found = ids(SOURCE)
    for expected in ("count_small: v < limit -> v <= limit", "count_small: v != LIMIT -> v == LIMIT",
                     "count_small: v < limit and v != LIMIT -> v < limit or v != LIMIT",
                     "count_small: total += 1 -> total = 1", "count_small: not values -> values",
                     "count_small: break -> continue", "count_small: 3 -> 4", "<module>: 0xA0 -> 0xA1",
                     "count_small: raise ValueError('no values') -> pass", "count_small: return total -> pass",
                     "count_small: if v < limit and v != LIMIT: -> pass"):
        assert expected in found, f"the mutator should make the mistake {expected!r}; it made {sorted(found)}"


def test_docstrings_annotations_and_messages_are_left_alone() -> None:
    found = " ".join(ids(SOURCE))
    for untouched in ("How many", "list[int]", "'no values' ->", "int ->"):
        assert untouched not in found, f"{untouched!r} is not code a test can pin, yet it was mutated: {found}"


def test_every_mutant_is_valid_python_that_differs_from_the_original() -> None:
    for mutant in mutants(SOURCE):
        compile(mutant.source, mutant.id, "exec")
        assert mutant.source != SOURCE, f"{mutant.id} changed nothing"


def test_ids_survive_edits_elsewhere_in_the_file() -> None:
    # The equivalents list names mutants by id: moving code down must not rename them.
    shifted = SOURCE.replace("LIMIT: int", "import os\n\n\nLIMIT: int", 1)
    assert ids(shifted) == ids(SOURCE), "ids must name what changed, not the line it is on"


def test_equivalents_file_format(tmp_path: pytest.TempPathFactory) -> None:
    (tmp_path / "lab.txt").write_text("# comment\nf: a < b -> a <= b  ## a == b never happens here\n")
    assert read_equivalents(tmp_path / "lab.txt") == {"f: a < b -> a <= b": "a == b never happens here"}
    (tmp_path / "lab.txt").write_text("f: a < b -> a <= b without a reason\n")
    with pytest.raises(ValueError, match="<mutant id>  ## <reason>"):
        read_equivalents(tmp_path / "lab.txt")


@pytest.mark.slow  # lab-03's tests four times over: the warm-up, the reference's measured run, two mutants
def test_verdicts_come_from_running_the_lab_tests() -> None:
    # The unchanged solution must survive (else every mutant would look killed), and a
    # solution that forgets to return what it held must be killed.
    lab = lab_dir("03")
    solution = (lab / "solution.py").read_text(encoding="utf-8")
    broken = next(m for m in mutants(solution) if m.id == "StreamingDetokenizer.flush: return text -> pass")
    results = run(lab, [Mutant("unchanged", 0, solution), broken], jobs=1)
    assert verdict(results["unchanged"]["code"]) == "survived", f"the reference itself must pass its tests: {results}"
    assert verdict(results[broken.id]["code"]) == "killed", f"a flush that returns nothing must be caught: {results}"
    assert results[broken.id]["stopped"] == "", f"a failing test, not a limit, must stop that mutant: {results}"
    assert "test_lab.py::test_" in results[broken.id]["killer"], f"the test that killed it must be named: {results}"


def test_the_last_run_orders_the_tests_killers_first() -> None:
    last = {"m1": Outcome("m1", 1, "killed", killer="t.py::b"), "m2": Outcome("m2", 2, "killed", killer="t.py::a"),
            "m3": Outcome("m3", 3, "killed", killer="t.py::b"), "m4": Outcome("m4", 4, "survived")}
    plan = Plan.from_last_run(last, {"mutant_0001.py": "m1", "mutant_0002.py": "m2", "mutant_0009.py": "new"})
    assert plan.ranking == ["t.py::b", "t.py::a"], f"the test that killed most mutants runs first: {plan}"
    assert plan.first == {"mutant_0001.py": "t.py::b", "mutant_0002.py": "t.py::a"}, (
        f"each mutant first meets the test that killed it last time (by file name in this run): {plan}")


def test_the_limit_grows_with_the_reference_and_counts_cpu_first() -> None:
    quiet, loaded = limits(2.0, 2.0), limits(2.0, 10.0)
    assert quiet.cpu_s == loaded.cpu_s > 2 * 2.0, "the CPU limit must come from the reference's CPU time alone"
    assert loaded.wall_s > quiet.wall_s > quiet.cpu_s, "the wall backstop must leave room for the load it saw"
    assert limits(20.0, 20.0).cpu_s > quiet.cpu_s, "a slower reference must allow its mutants more"


def spin() -> int:
    while True:
        pass


def block() -> int:
    time.sleep(3600)
    return 0


@pytest.mark.parametrize(("run_away", "limit", "stopped"), [
    (spin, Limit(cpu_s=1, wall_s=600, idle_s=600), "cpu"),  # a loop: stopped once it has used its CPU seconds
    (block, Limit(cpu_s=600, wall_s=600, idle_s=1), "idle"),  # a wait that uses no CPU: stopped as blocked
])
def test_a_run_away_mutant_is_stopped_by_its_limit(run_away: object, limit: Limit, stopped: str) -> None:
    result = _in_child(run_away, limit)  # type: ignore[arg-type]
    assert result["stopped"] == stopped, f"the {stopped} limit must stop {run_away}: {result}"
    assert verdict(result["code"]) == "killed", f"a mutant stopped by a limit counts as killed: {result}"
    if stopped == "cpu":
        # (the kernel checks the limit once per tick, and rusage rounds: about 1 s, never the 600 s of wall)
        assert 0.5 <= result["cpu"] < 3, f"the child must be stopped at its CPU limit (1 s, SIGKILL at 2 s): {result}"


def test_without_the_kernels_queue_times_the_wall_clock_stops_a_blocked_mutant(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Activity, "sample", lambda self: None)  # as where /proc/<pid>/schedstat does not exist
    result = _in_child(block, Limit(cpu_s=600, wall_s=1, idle_s=600))
    assert result["stopped"] == "wall", f"without the kernel's counts, the wall backstop must stop a wait: {result}"


STARVED_WALL_S = 4.0


def spin_starved() -> int:
    # Pinned to the CPU the competitor spins on, in the idle scheduling class: it gets a few percent of that CPU
    # (whatever niceness the test runs at) and waits for it the rest of the time, as a mutant on a loaded machine.
    os.sched_setaffinity(0, {0})
    os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    until = time.monotonic() + STARVED_WALL_S
    while time.monotonic() < until:
        pass
    return 0


@pytest.mark.slow  # STARVED_WALL_S of wall time, one core kept busy
@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="needs CPU affinity (Linux)")
def test_a_mutant_that_computes_is_never_idle_however_loaded_the_machine() -> None:
    spinner = "import os\nos.sched_setaffinity(0, {0})\nprint('spinning', flush=True)\nwhile True: pass"
    competitor = subprocess.Popen([sys.executable, "-c", spinner], stdout=subprocess.PIPE, text=True)
    try:
        assert competitor.stdout is not None and competitor.stdout.readline() == "spinning\n", "the competitor must run"
        result = _in_child(spin_starved, Limit(cpu_s=600, wall_s=1, idle_s=1))
    finally:
        competitor.kill()
        competitor.wait()
    assert result["cpu"] < IDLE_FRACTION * result["wall"], (
        f"the test needs a starved run (under {IDLE_FRACTION:.0%} of the wall time on a CPU) to mean anything: "
        f"{result}")
    assert (result["stopped"], result["code"]) == ("", 0), (
        f"a run waiting for a CPU is computing, not blocked: neither the idle rule nor the wall clock may stop it "
        f"(it used {result['cpu']} s of CPU in {result['wall']} s): {result}")
