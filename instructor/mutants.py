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
loaded machine does not change the verdicts). A mutant that blocks (waits forever without
computing) is stopped once it has spent IDLE_S seconds mostly neither running nor waiting for a
CPU, as the kernel counts it: on a loaded machine a computing mutant waits for a CPU, so load
does not make it look idle. A mutant stopped either way counts as killed, and the report lists it
as such.

Usage (``ARGS`` in make): ``python -m instructor.mutants 03 [--jobs 2] [--survivors]
[--only TEXT] [--list]``. ``--survivors`` re-runs only what survived last time (the last
run is kept in ``build/mutants/lab-NN.json``), which is the quick loop while writing tests.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
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
# A mutant that blocks without using CPU never reaches its CPU limit. It is stopped once its processes have,
# for IDLE_S seconds, been running or waiting for a CPU less than IDLE_FRACTION of that time (see ``Activity``).
# A run that computes is runnable all the time, however loaded the machine, so the load cannot stop it.
IDLE_S = 10.0
IDLE_FRACTION = 0.1
IDLE_SAMPLE_S = 0.5  # how often the parent reads /proc for it
# Where the kernel does not report that (no /proc/<pid>/schedstat), a wall-clock backstop instead: WALL_FACTOR
# times the CPU limit, scaled by the load the reference's run saw (this one does depend on the load).
WALL_FACTOR = 3.0
# A mutant can also run away in memory (a loop that never moves on but keeps appending): with no
# ceiling it takes all of the machine's memory before any timeout, and the kernel kills the whole
# worker, every verdict in it too. Under this ceiling it gets a MemoryError, which fails its test.
WORKER_MEMORY_BYTES = 4 << 30
UNCHANGED = "<the solution, unchanged>"
PROGRESS_EVERY_S = 60.0  # how often a run says how many mutants are judged so far


@dataclass(frozen=True)
class Outcome:
    id: str
    line: int
    status: str  # "killed", "survived", "equivalent" (survived and listed), or "error"
    stopped: str = ""  # "cpu", "idle" or "wall": a limit, not a failing test, ended its run (still "killed")
    cpu: float = 0.0  # CPU seconds its run took
    killer: str = ""  # the test that failed on it (its run stops there), the first to run on it next time


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


@dataclass(frozen=True)
class Plan:
    """The order the tests run in on each mutant, from the last run's verdicts: the test that killed this
    mutant last time first, then the tests that killed the most mutants, then the rest quickest first.
    Every test still runs on a mutant that fails none, so the order decides only how soon a killed mutant's
    run ends (with -x, at its first failing test), never a verdict."""

    ranking: list[str]  # test ids, the most kills first
    first: dict[str, str]  # mutant file name -> the test that killed that mutant last time

    @staticmethod
    def from_last_run(last: dict[str, Outcome], files: dict[str, str]) -> Plan:
        kills = Counter(o.killer for o in last.values() if o.killer)
        by_id = {mutant_id: name for name, mutant_id in files.items()}
        first = {by_id[o.id]: o.killer for o in last.values() if o.killer and o.id in by_id}
        return Plan([test for test, _ in kills.most_common()], first)


def run_one_worker(lab: Path, mutant_files: list[Path], plan: Plan) -> dict[str, dict[str, Any]]:
    """In this process: the lab's graded tests on the reference, then on each mutant file in turn.

    Every run is a child forked from this warm process (Python, pytest and the course are
    imported once; the reference's own run has filled the caches: vocabularies, recorded data),
    so a mutant cannot leave anything behind for the next one, and one that runs away is killed
    whole. Its limit comes from the reference's run in a child just like it: see :func:`limits`.
    Returns, per file name, the child's pytest exit code, CPU and wall seconds, which
    limit stopped it ("" if none) and the test that failed first ("" if none did).
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

    rank = {test: k for k, test in enumerate(plan.ranking)}
    seconds: dict[str, float] = {}  # each test's time in the warm-up (the reference's run in this process)

    class Order:  # a pytest plugin: runs the tests in the plan's order and notes the first that fails
        def __init__(self, first: str) -> None:
            self.first = first
            self.failed = ""

        def pytest_collection_modifyitems(self, items: list[Any]) -> None:
            # The plan's tests first; the rest quickest first (in the warm-up's times), so a mutant that many
            # tests kill meets a cheap one early even when no run has been made before.
            items.sort(key=lambda item: (item.nodeid != self.first, rank.get(item.nodeid, len(rank)),
                                         seconds.get(item.nodeid, 0.0)))

        def pytest_runtest_logreport(self, report: Any) -> None:
            if report.failed and not self.failed:
                self.failed = report.nodeid

    class Timer:  # a pytest plugin for the warm-up: each test's seconds, setup and teardown included
        def pytest_runtest_logreport(self, report: Any) -> None:
            seconds[report.nodeid] = seconds.get(report.nodeid, 0.0) + report.duration

    def tests_on(path: Path, timed: bool = False) -> int:
        os.environ[env_key] = str(path)
        for name, module in list(sys.modules.items()):  # the lab's test module, loaded for the last run
            if Path(getattr(module, "__file__", None) or "/").parent == lab:
                del sys.modules[name]
        # No per-test timeout: the child's CPU limit (and its idle rule) stop a mutant that loops or blocks.
        args = [str(lab), "-x", "-m", "not control", "-p", "no:cacheprovider", "-p", "no:xdist",
                "-p", "no:terminal", "--assert=plain", "--timeout", "0"]
        order = Order(plan.first.get(path.name, ""))
        plugins: list[Any] = [order]
        if timed:
            plugins.append(Timer())
        code = int(pytest.main(args, plugins=plugins))
        path.with_suffix(".killer").write_text(order.failed, encoding="utf-8")  # read by this worker, after
        return code

    reference, *mutant_files = mutant_files
    # Warm-up, in this process: imports the lab's tests and fills every cache the children then share.
    results: dict[str, dict[str, Any]] = {}
    warm = tests_on(reference, timed=True)
    if warm != 0:  # a failing reference makes every verdict meaningless (main says so)
        results[reference.name] = {"code": warm, "cpu": 0.0, "wall": 0.0, "stopped": ""}
        return results
    if threading.active_count() != 1:  # a child would inherit the thread's locks, not the thread
        raise RuntimeError(f"the lab's tests left threads running after the reference's run, so this process "
                           f"cannot fork a child per mutant: {[t.name for t in threading.enumerate()]}")
    # Everything the warm-up left is frozen out of the collector's reach: a child's collections (pytest runs
    # gc.collect at its end, the interpreter whenever the young generations fill) then scan only what the
    # child made, not the vocabularies, and touch no inherited page (0.55 s CPU per child on lab-07, now 0.08).
    gc.freeze()
    measured = _in_child(lambda: tests_on(reference), None)
    results[reference.name] = measured
    if measured["code"] != 0:
        return results
    limit = limits(measured["cpu"], measured["wall"])
    for path in mutant_files:
        results[path.name] = _in_child(lambda path=path: tests_on(path), limit)  # type: ignore[misc]
        killer = path.with_suffix(".killer")  # not written by a child that a limit stopped
        results[path.name]["killer"] = killer.read_text(encoding="utf-8") if killer.exists() else ""
        path.with_suffix(".done").touch()  # the parent counts these to say how far the run is
    return results


@dataclass(frozen=True)
class Limit:
    """What one mutant's run may take: CPU seconds (the measure); IDLE_S seconds blocked (see :class:`Activity`);
    wall seconds, the backstop only where the kernel does not report how long a process waited for a CPU."""

    cpu_s: float
    wall_s: float
    idle_s: float = IDLE_S


def limits(reference_cpu_s: float, reference_wall_s: float) -> Limit:
    """A mutant's limits, from the reference's own run of the same tests in the same kind of child.

    CPU time is the measure: it does not grow when other work shares the cores. A mutant that
    passes every test does about the reference's work, so CPU_FACTOR times it plus CPU_SLACK_S
    leaves room for a correct but slower variant and stops a loop after a few seconds. A mutant
    that blocks without using CPU (a thread waiting forever) is stopped after IDLE_S seconds of
    being idle, which the load does not change. The wall limit is only the fallback where the
    kernel does not say: it scales with how loaded the machine was when the reference ran (its
    wall / CPU ratio).
    """
    cpu = CPU_FACTOR * reference_cpu_s + CPU_SLACK_S
    load = max(1.0, reference_wall_s / max(reference_cpu_s, 0.01))
    return Limit(cpu_s=cpu, wall_s=WALL_FACTOR * load * cpu + CPU_SLACK_S)


class Activity:
    """How long a process and everything it started have been running or waiting for a CPU, in seconds.

    On a loaded machine a process that computes spends its time running or queued for a CPU; one that
    blocks does neither. So the total tells a blocked mutant from a starved one, whatever the load.
    Each :meth:`sample` adds what every process's CPU time (its threads, ended ones included, and the
    children it reaped: /proc/<pid>/stat) and every live thread's run-queue wait (its schedstat) grew by
    since it was last seen, so a process or thread that ended between two samples keeps what it added.
    The kernel adds a wait only when the thread next gets a CPU, so a thread starved for longer than
    the interval between samples shows no growth; if any thread is running or runnable at the sample
    (state R), the whole interval counts as active.
    """

    def __init__(self, root: int) -> None:
        self.root = root
        self.seconds = 0.0
        self._cpu_ticks: dict[int, int] = {}  # pid -> its CPU ticks when last seen
        self._queued_ns: dict[int, int] = {}  # tid -> its run-queue wait when last seen
        self._last: float | None = None  # when the last sample was taken
        self._tick_s = 1.0 / os.sysconf("SC_CLK_TCK")
        self.available = os.path.exists(f"/proc/{root}/schedstat")

    def sample(self) -> float | None:
        """The total so far, or None when /proc does not say (not Linux, or no schedstat)."""
        if not self.available:
            return None
        now, counted, runnable = time.monotonic(), 0.0, False
        for pid, ticks in self._tree().items():
            counted += max(0, ticks - self._cpu_ticks.get(pid, 0)) * self._tick_s
            self._cpu_ticks[pid] = ticks
            with contextlib.suppress(OSError):  # it ended since: its CPU time was counted, its queueing before
                for tid in os.listdir(f"/proc/{pid}/task"):
                    with contextlib.suppress(OSError, ValueError, IndexError):
                        with open(f"/proc/{pid}/task/{tid}/schedstat", encoding="ascii") as f:
                            queued = int(f.read().split()[1])  # run time, run-queue wait, slices (ns, ns, count)
                        counted += max(0, queued - self._queued_ns.get(int(tid), 0)) / 1e9
                        self._queued_ns[int(tid)] = queued
                        with open(f"/proc/{pid}/task/{tid}/stat", encoding="ascii", errors="replace") as f:
                            runnable = runnable or f.read().rsplit(")", 1)[1].split()[0] == "R"
        interval = 0.0 if self._last is None else now - self._last
        self._last = now
        self.seconds += max(counted, interval) if runnable else counted
        return self.seconds

    def _tree(self) -> dict[int, int]:
        """Each process in the tree under ``root`` (``root`` too): its CPU ticks, its threads' and reaped children's."""
        parents: dict[int, int] = {}
        ticks: dict[int, int] = {}
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            with contextlib.suppress(OSError, ValueError, IndexError):
                with open(f"/proc/{name}/stat", encoding="ascii", errors="replace") as f:
                    fields = f.read().rsplit(")", 1)[1].split()  # after "pid (comm)": the name may hold anything
                parents[int(name)] = int(fields[1])
                ticks[int(name)] = sum(int(v) for v in fields[11:15])  # utime, stime, cutime, cstime
        tree, frontier = {self.root}, [self.root]
        children: dict[int, list[int]] = {}
        for pid, parent in parents.items():
            children.setdefault(parent, []).append(pid)
        while frontier:
            for child in children.get(frontier.pop(), []):
                if child not in tree:
                    tree.add(child)
                    frontier.append(child)
        return {pid: ticks[pid] for pid in tree if pid in ticks}


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
    activity = Activity(pid)
    history: list[tuple[float, float]] = []  # (wall seconds, activity seconds), one per IDLE_SAMPLE_S
    next_sample = started
    while True:
        done, status, usage = os.wait4(pid, os.WNOHANG)
        if done:
            break
        now = time.monotonic()
        if limit is not None and now >= next_sample:
            next_sample = now + IDLE_SAMPLE_S
            active = activity.sample()
            if active is None:  # the kernel does not say: the wall clock decides
                stopped = "wall" if now - started > limit.wall_s else ""
            else:
                history.append((now, active))
                while len(history) > 1 and now - history[1][0] >= limit.idle_s:
                    history.pop(0)  # keep the oldest sample at least idle_s old
                then, active_then = history[0]
                if now - then >= limit.idle_s and active - active_then < IDLE_FRACTION * (now - then):
                    stopped = "idle"
            if stopped:
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


def run(lab: Path, chosen: list[Mutant], jobs: int,
        last: dict[str, Outcome] | None = None) -> dict[str, dict[str, Any]]:
    """How the lab's tests ended on each chosen mutant, spread over ``jobs`` worker processes.

    Each result holds pytest's exit ``code``, the ``cpu`` and ``wall`` seconds of its run, which
    limit ``stopped`` it and the ``killer`` test; the reference's own run is under :data:`UNCHANGED`.
    ``last`` (the last run's outcomes) orders the tests: see :class:`Plan`.
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
        plan = Path(scratch) / "plan.json"
        plan.write_text(json.dumps(asdict(Plan.from_last_run(last or {}, files))), encoding="utf-8")
        workers = []
        for j, share in enumerate(s for s in shares if s):
            out = Path(scratch) / f"worker_{j}.json"
            command = [sys.executable, "-m", "instructor.mutants", "--worker", str(lab), str(out), str(plan),
                       *(str(Path(scratch) / n) for n in share)]
            env = {k: v for k, v in os.environ.items() if not k.startswith(("LAB_IMPL", "PYTEST_"))}
            log = Path(scratch) / f"worker_{j}.log"
            with log.open("w") as stderr:  # a file, not a pipe: nobody reads it until the worker ends
                workers.append((out, log, subprocess.Popen(command, cwd=REPO_ROOT, env=env, stdout=subprocess.DEVNULL,
                                                           stderr=stderr)))
        started, reported = time.monotonic(), time.monotonic()
        while any(process.poll() is None for _, _, process in workers):
            time.sleep(0.5)
            if time.monotonic() - reported >= PROGRESS_EVERY_S:
                reported = time.monotonic()
                done = len(list(Path(scratch).glob("*.done")))
                print(f"  {done} of {len(files) - 1} mutants judged in {reported - started:.0f} s", flush=True)
        results: dict[str, dict[str, Any]] = {}
        for out, log, process in workers:
            if not out.exists():
                errors = log.read_text(encoding="utf-8", errors="replace")
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
             f"limit ({limit.cpu_s:.1f} s CPU, or {limit.idle_s:.0f} s blocked) rather than by a failing test"]
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
        worker_lab, out, plan, *paths = argv[1:]
        order = Plan(**json.loads(Path(plan).read_text(encoding="utf-8")))
        Path(out).write_text(json.dumps(run_one_worker(Path(worker_lab), [Path(p) for p in paths], order)))
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
    no_run: dict[str, Any] = {"code": 0, "cpu": 0.0, "wall": 0.0, "stopped": ""}
    results = run(lab, to_run, max(1, options.jobs), last) if to_run else {UNCHANGED: no_run}
    unchanged = results.pop(UNCHANGED)
    if unchanged["code"] != 0:
        print(f"the lab's tests do not pass on the unchanged solution.py (pytest exit {unchanged['code']}), so no "
              "verdict on a mutant would mean anything. See why with: "
              f"LAB_IMPL=solution make lab-{lab_number(lab.name)}")
        return 2
    outcomes = [Outcome(m.id, m.line, "equivalent", "", 0.0) if m.id in equivalents else
                Outcome(m.id, m.line, verdict(results[m.id]["code"]), results[m.id]["stopped"], results[m.id]["cpu"],
                        results[m.id].get("killer", ""))
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
