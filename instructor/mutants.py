"""Mutation testing of a lab's solution against the lab's own tests: ``make mutants LAB=03``.

How good are a lab's tests? Make many copies of its ``solution.py``, each with one small
mistake (:mod:`instructor.mutate`), and run the lab's graded tests on each copy.
A mutant is *killed* when some test fails on it, and *survives* when every test passes.
A survivor is either a mistake the tests cannot see (write the test) or a change that
does not change behaviour at all (list it in ``instructor/equivalent_mutants/<lab folder>.txt``, one
line each: ``<mutant id>  ## <why it behaves the same>``).

The mutants run through the LAB_IMPL loader (``LAB_IMPL_NN=<mutant file>``), exactly as a
student's file would. Each worker process imports everything and runs the reference once, then
forks a child per mutant, so Python, the heavy imports and the vocabularies are paid once per
worker rather than once per mutant. The reference also runs once in such a child, and what it
took sets every mutant's limit: CPU_FACTOR times its CPU time plus CPU_SLACK_S (CPU time, so a
loaded machine does not change the verdicts), with a wall-clock backstop for a mutant that
blocks. A mutant stopped by the limit counts as killed, and the report lists it as such.

Usage (``ARGS`` in make): ``python -m instructor.mutants 03 [--jobs 2] [--survivors]
[--only TEXT] [--list]``. ``--survivors`` re-runs only what survived last time (the last
run is kept in ``build/mutants/lab-NN.json``), which is the quick loop while writing tests.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from instructor.mutate import Mutant, mutants
from mini_vllm.labs import REPO_ROOT, lab_dir, lab_number

EQUIVALENTS_DIR = Path(__file__).parent / "equivalent_mutants"  # one <lab folder>.txt per lab; never shipped
RESULTS_DIR = REPO_ROOT / "build" / "mutants"
SEPARATOR = "  ## "
# A mutant's run may take CPU_FACTOR times the CPU time of the reference's run plus CPU_SLACK_S
# (see ``limits``): a loop is stopped within seconds, a merely slower mistake still gets judged.
CPU_FACTOR = 3.0
CPU_SLACK_S = 5.0
# The wall-clock backstop, for a mutant that blocks without using CPU, as a multiple of the CPU limit.
WALL_FACTOR = 3.0
# A mutant can also run away in memory (a loop that never moves on but keeps appending): with no
# ceiling it takes all of the machine's memory before any timeout, and the kernel kills the whole
# worker, every verdict in it too. Under this ceiling it gets a MemoryError, which fails its test.
WORKER_MEMORY_BYTES = 4 << 30
UNCHANGED = "<the solution, unchanged>"


@dataclass(frozen=True)
class Outcome:
    id: str
    line: int
    status: str  # "killed", "survived", "equivalent" (survived and listed), or "error"
    stopped: str = ""  # "cpu" or "wall": a limit, not a failing test, ended its run (still "killed")
    cpu: float = 0.0  # CPU seconds its run took


def equivalents_file(lab: Path) -> Path:
    return EQUIVALENTS_DIR / f"{lab.name}.txt"


def read_equivalents(path: Path) -> dict[str, str]:
    """The listed equivalent mutants in ``path`` (see :func:`equivalents_file`): id -> reason."""
    if not path.exists():
        return {}
    listed: dict[str, str] = {}
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        line = raw.rstrip()
        if not line or line.startswith("#"):
            continue
        if SEPARATOR not in line:
            raise ValueError(f"{path}:{number}: write '<mutant id>{SEPARATOR}<reason>', got {line!r}")
        mutant_id, reason = line.split(SEPARATOR, 1)
        listed[mutant_id.strip()] = reason.strip()
    return listed


def run_one_worker(lab: Path, mutant_files: list[Path]) -> dict[str, dict[str, Any]]:
    """In this process: the lab's graded tests on the reference, then on each mutant file in turn.

    Every run is a child forked from this warm process (Python, pytest and the course are
    imported once; the reference's own run has filled the caches: vocabularies, recorded data),
    so a mutant cannot leave anything behind for the next one, and one that runs away is killed
    whole. Its limit comes from the reference's run in a child just like it: see :func:`limits`.
    Returns, per file name, the child's pytest exit code, CPU and wall seconds, and which
    limit stopped it ("" if none).
    """
    import resource

    import pytest  # here, not at the top: the parent process never runs pytest itself

    _, hard = resource.getrlimit(resource.RLIMIT_DATA)
    ceiling = WORKER_MEMORY_BYTES if hard == resource.RLIM_INFINITY else min(WORKER_MEMORY_BYTES, hard)
    resource.setrlimit(resource.RLIMIT_DATA, (ceiling, hard))
    os.environ["HYPOTHESIS_PROFILE"] = "contract"  # the graded examples, without shrinking
    # A mutant is the instructor's own solution with one change: it runs here, not in the grading
    # sandbox (which proves nothing about the tests' sharpness and costs a round trip per call).
    os.environ["LAB_SANDBOX"] = "0"
    # HF tokenizers' thread pool must not exist when this process forks (a child would inherit
    # its locks but not its threads); with parallelism off it is never started.
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    env_key = f"LAB_IMPL_{lab_number(lab.name)}"

    def tests_on(path: Path) -> int:
        os.environ[env_key] = str(path)
        for name, module in list(sys.modules.items()):  # the lab's test module, loaded for the last run
            if Path(getattr(module, "__file__", None) or "/").parent == lab:
                del sys.modules[name]
        # No per-test timeout: the child's CPU limit (and its wall backstop) stop a mutant that loops.
        args = [str(lab), "-x", "-m", "not control", "-p", "no:cacheprovider", "-p", "no:xdist",
                "-p", "no:terminal", "--assert=plain", "--timeout", "0"]
        return int(pytest.main(args))

    reference, *mutant_files = mutant_files
    # Warm-up, in this process: imports the lab's tests and fills every cache the children then share.
    results: dict[str, dict[str, Any]] = {}
    warm = tests_on(reference)
    if warm != 0:  # a failing reference makes every verdict meaningless (main says so)
        results[reference.name] = {"code": warm, "cpu": 0.0, "wall": 0.0, "stopped": ""}
        return results
    if threading.active_count() != 1:  # a child would inherit the thread's locks, not the thread
        raise RuntimeError(f"the lab's tests left threads running after the reference's run, so this process "
                           f"cannot fork a child per mutant: {[t.name for t in threading.enumerate()]}")
    measured = _in_child(lambda: tests_on(reference), None)
    results[reference.name] = measured
    if measured["code"] != 0:
        return results
    limit = limits(measured["cpu"], measured["wall"])
    for path in mutant_files:
        results[path.name] = _in_child(lambda path=path: tests_on(path), limit)  # type: ignore[misc]
    return results


@dataclass(frozen=True)
class Limit:
    """What one mutant's run may take: CPU seconds (the measure), wall seconds (the backstop)."""

    cpu_s: float
    wall_s: float


def limits(reference_cpu_s: float, reference_wall_s: float) -> Limit:
    """A mutant's limits, from the reference's own run of the same tests in the same kind of child.

    CPU time is the measure: it does not grow when other work shares the cores. A mutant that
    passes every test does about the reference's work, so CPU_FACTOR times it plus CPU_SLACK_S
    leaves room for a correct but slower variant and stops a loop after a few seconds. The wall
    limit only catches a mutant that blocks without using CPU (a thread waiting forever); it
    scales with how loaded the machine was when the reference ran (its wall / CPU ratio).
    """
    cpu = CPU_FACTOR * reference_cpu_s + CPU_SLACK_S
    load = max(1.0, reference_wall_s / max(reference_cpu_s, 0.01))
    return Limit(cpu_s=cpu, wall_s=WALL_FACTOR * load * cpu + CPU_SLACK_S)


def _in_child(tests: Callable[[], int], limit: Limit | None) -> dict[str, Any]:
    """Run ``tests`` in a forked child (its own process group) under ``limit``; what it cost and how it ended."""
    import resource

    started = time.monotonic()
    pid = os.fork()
    if pid == 0:  # the child: run the tests, exit with pytest's code, never return into the parent's code
        code = 3
        try:
            os.setpgid(0, 0)
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
            if limit is not None:  # SIGXCPU at the soft limit, SIGKILL a second later at the hard one
                seconds = math.ceil(limit.cpu_s)
                resource.setrlimit(resource.RLIMIT_CPU, (seconds, seconds + 1))
            code = tests()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    stopped = ""
    while True:
        done, status, usage = os.wait4(pid, os.WNOHANG)
        if done:
            break
        if limit is not None and time.monotonic() - started > limit.wall_s:
            stopped = "wall"
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
            _, status, usage = os.wait4(pid, 0)
            break
        time.sleep(0.02)
    cpu = usage.ru_utime + usage.ru_stime
    if os.WIFSIGNALED(status):
        code = 2  # stopped from outside: a test did not pass
        over_cpu = limit is not None and usage.ru_utime + usage.ru_stime >= limit.cpu_s
        if not stopped:  # SIGXCPU from the soft limit, or SIGKILL from the hard one a second later
            stopped = "cpu" if os.WTERMSIG(status) == signal.SIGXCPU or over_cpu else f"signal {os.WTERMSIG(status)}"
    else:
        code = os.WEXITSTATUS(status)
    with contextlib.suppress(ProcessLookupError):  # whatever the child started and left behind
        os.killpg(pid, signal.SIGKILL)
    return {"code": code, "cpu": round(cpu, 3), "wall": round(time.monotonic() - started, 3), "stopped": stopped}


def run(lab: Path, chosen: list[Mutant], jobs: int) -> dict[str, dict[str, Any]]:
    """How the lab's tests ended on each chosen mutant, spread over ``jobs`` worker processes.

    Each result holds pytest's exit ``code``, the ``cpu`` and ``wall`` seconds of its run and
    which limit ``stopped`` it; the reference's own run is under :data:`UNCHANGED`, with the
    ``limit`` derived from it.
    """
    with tempfile.TemporaryDirectory(prefix="mutants-") as scratch:
        files = {}
        # The unmodified solution runs first in each worker: if the tests fail on it (or fail to
        # collect), every mutant would look killed, so the run stops instead (see ``main``).
        chosen = [Mutant(UNCHANGED, 0, (lab / "solution.py").read_text(encoding="utf-8")), *chosen]
        for k, mutant in enumerate(chosen):
            path = Path(scratch) / f"mutant_{k:04d}.py"
            path.write_text(mutant.source, encoding="utf-8")
            files[path.name] = mutant.id
        first, *names = sorted(files)
        shares = [[first, *names[j::jobs]] for j in range(jobs)]
        workers = []
        for j, share in enumerate(s for s in shares if s):
            out = Path(scratch) / f"worker_{j}.json"
            command = [sys.executable, "-m", "instructor.mutants", "--worker", str(lab), str(out),
                       *(str(Path(scratch) / n) for n in share)]
            env = {k: v for k, v in os.environ.items() if not k.startswith(("LAB_IMPL", "PYTEST_"))}
            workers.append((out, subprocess.Popen(command, cwd=REPO_ROOT, env=env, stdout=subprocess.DEVNULL,
                                                  stderr=subprocess.PIPE, text=True)))
        results: dict[str, dict[str, Any]] = {}
        for out, process in workers:
            _, errors = process.communicate()
            if not out.exists():
                raise RuntimeError(f"a mutant worker died (exit {process.returncode}):\n{errors[-2000:]}")
            for name, result in json.loads(out.read_text()).items():
                mutant_id = files[name]
                if mutant_id == UNCHANGED:  # each worker's reference run: any failure counts, the largest limit shows
                    result = max(results.get(mutant_id, result), result, key=lambda r: (r["code"], r["cpu"]))
                results[mutant_id] = result
    return results


def verdict(code: int) -> str:
    # pytest: 0 all passed, 1 some failed (-x stops at the first), 2 interrupted (a limit stopped
    # the run, see ``_in_child``), 3 internal error, 4 usage error, 5 nothing collected.
    if code == 0:
        return "survived"
    if code in (1, 2):
        return "killed"
    return "error"


def report(lab: Path, outcomes: list[Outcome], equivalents: dict[str, str], seconds: float, limit: Limit) -> str:
    counts = {s: sum(o.status == s for o in outcomes) for s in ("killed", "survived", "equivalent", "error")}
    judged = counts["killed"] + counts["survived"]
    score = 100.0 * counts["killed"] / judged if judged else 100.0
    by_limit = [o for o in outcomes if o.stopped]
    lines = [f"{lab.name}: {len(outcomes)} mutants of solution.py in {seconds:.0f} s: {counts['killed']} killed, "
             f"{counts['survived']} survived, {counts['equivalent']} listed as equivalent, {counts['error']} errors",
             f"killed {score:.1f}% of the non-equivalent mutants; {len(by_limit)} of the killed were stopped by the "
             f"limit ({limit.cpu_s:.1f} s CPU, {limit.wall_s:.0f} s wall) rather than by a failing test"]
    for o in by_limit:
        lines.append(f"  stopped ({o.stopped} limit, {o.cpu:.1f} s CPU): line {o.line}: {o.id}")
    for status in ("survived", "error"):
        for o in (o for o in outcomes if o.status == status):
            lines.append(f"  {status}: line {o.line}: {o.id}")
    stale = sorted(set(equivalents) - {o.id for o in outcomes})
    if stale:
        listing = equivalents_file(lab).relative_to(REPO_ROOT)
        lines.append(f"  {listing} lists {len(stale)} ids that are no longer mutants of solution.py "
                     "(the code changed): " + "; ".join(stale[:5]))
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    if argv[:1] == ["--worker"]:
        worker_lab, out, *paths = argv[1:]
        Path(out).write_text(json.dumps(run_one_worker(Path(worker_lab), [Path(p) for p in paths])))
        return 0
    parser = argparse.ArgumentParser(prog="make mutants LAB=NN", description=__doc__.split("\n\n")[0])
    parser.add_argument("lab", help="the lab number, e.g. 03")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="worker processes (default: cores)")
    parser.add_argument("--survivors", action="store_true", help="only what survived the last run")
    parser.add_argument("--only", default="", help="only mutants whose id contains this text")
    parser.add_argument("--list", action="store_true", help="list the mutants and stop")
    options = parser.parse_args(argv)
    lab = lab_dir(options.lab)
    every = mutants((lab / "solution.py").read_text(encoding="utf-8"))
    equivalents = read_equivalents(equivalents_file(lab))
    chosen = [m for m in every if options.only in m.id]
    saved = RESULTS_DIR / f"lab-{lab_number(lab.name)}.json"
    last = {o["id"]: Outcome(**o) for o in json.loads(saved.read_text())["outcomes"]} if saved.exists() else {}
    partial = bool(options.only or options.survivors)
    if options.survivors:
        chosen = [m for m in chosen if m.id not in last or last[m.id].status != "killed"]
    if options.list:
        for m in chosen:
            print(f"line {m.line}: {m.id}" + ("  (listed as equivalent)" if m.id in equivalents else ""))
        return 0
    to_run = [m for m in chosen if m.id not in equivalents]
    print(f"{lab.name}: running {len(to_run)} mutants on {options.jobs} worker(s)...", flush=True)
    started = time.monotonic()
    no_run = {"code": 0, "cpu": 0.0, "wall": 0.0, "stopped": ""}
    results = run(lab, to_run, max(1, options.jobs)) if to_run else {UNCHANGED: no_run}
    unchanged = results.pop(UNCHANGED)
    if unchanged["code"] != 0:
        print(f"the lab's tests do not pass on the unchanged solution.py (pytest exit {unchanged['code']}), so no "
              "verdict on a mutant would mean anything. See why with: "
              f"LAB_IMPL=solution make lab-{lab_number(lab.name)}")
        return 2
    outcomes = [Outcome(m.id, m.line, "equivalent", "", 0.0) if m.id in equivalents else
                Outcome(m.id, m.line, verdict(results[m.id]["code"]), results[m.id]["stopped"], results[m.id]["cpu"])
                for m in chosen]
    limit = limits(unchanged["cpu"], unchanged["wall"])
    print(f"the reference's run: {unchanged['cpu']:.1f} s CPU, {unchanged['wall']:.1f} s wall", flush=True)
    print(report(lab, outcomes, {} if partial else equivalents, time.monotonic() - started, limit))
    # A partial run updates the saved verdicts of what it ran, so --survivors shrinks as tests improve.
    kept = {**last, **{o.id: o for o in outcomes}} if partial else {o.id: o for o in outcomes}
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    saved.write_text(json.dumps({"lab": lab.name, "outcomes": [asdict(o) for o in kept.values()]}, indent=1))
    return 1 if any(o.status in ("survived", "error") for o in outcomes) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
