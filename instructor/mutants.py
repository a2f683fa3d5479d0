"""Mutation testing of a lab's solution against the lab's own tests: ``make mutants LAB=03``.

How good are a lab's tests? Make many copies of its ``solution.py``, each with one small
mistake (:mod:`instructor.mutate`), and run the lab's graded tests on each copy.
A mutant is *killed* when some test fails on it, and *survives* when every test passes.
A survivor is either a mistake the tests cannot see (write the test) or a change that
does not change behaviour at all (list it in ``instructor/equivalent_mutants/<lab folder>.txt``, one
line each: ``<mutant id>  ## <why it behaves the same>``).

The mutants run through the LAB_IMPL loader (``LAB_IMPL_NN=<mutant file>``), exactly as a
student's file would. Each worker process runs its share in one interpreter, so Python and
the heavy imports start once per worker rather than once per mutant; a mutant that loops
forever is stopped by pytest-timeout and counts as killed.

Usage (``ARGS`` in make): ``python -m instructor.mutants 03 [--jobs 2] [--survivors]
[--only TEXT] [--list]``. ``--survivors`` re-runs only what survived last time (the last
run is kept in ``build/mutants/lab-NN.json``), which is the quick loop while writing tests.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from instructor.mutate import Mutant, mutants
from mini_vllm.labs import REPO_ROOT, lab_dir, lab_number

EQUIVALENTS_DIR = Path(__file__).parent / "equivalent_mutants"  # one <lab folder>.txt per lab; never shipped
RESULTS_DIR = REPO_ROOT / "build" / "mutants"
SEPARATOR = "  ## "
PER_TEST_TIMEOUT_S = 30
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


def run_one_worker(lab: Path, mutant_files: list[Path]) -> dict[str, int]:
    """In this process: the lab's graded tests on each mutant file in turn; pytest's exit code per file."""
    import resource

    import pytest  # here, not at the top: the parent process never runs pytest itself

    _, hard = resource.getrlimit(resource.RLIMIT_DATA)
    ceiling = WORKER_MEMORY_BYTES if hard == resource.RLIM_INFINITY else min(WORKER_MEMORY_BYTES, hard)
    resource.setrlimit(resource.RLIMIT_DATA, (ceiling, hard))
    os.environ["HYPOTHESIS_PROFILE"] = "contract"  # the graded examples, without shrinking
    # A mutant is the instructor's own solution with one change: it runs here, not in the grading
    # sandbox (which proves nothing about the tests' sharpness and costs a round trip per call).
    os.environ["LAB_SANDBOX"] = "0"
    env_key = f"LAB_IMPL_{lab_number(lab.name)}"
    codes: dict[str, int] = {}
    for path in mutant_files:
        os.environ[env_key] = str(path)
        for name, module in list(sys.modules.items()):  # the lab's test module, loaded for the last mutant
            if Path(getattr(module, "__file__", None) or "/").parent == lab:
                del sys.modules[name]
        args = [str(lab), "-x", "-m", "not control", "-p", "no:cacheprovider", "-p", "no:xdist",
                "-p", "no:terminal", "--assert=plain", "--timeout", str(PER_TEST_TIMEOUT_S)]
        codes[path.name] = int(pytest.main(args))
    return codes


def run(lab: Path, chosen: list[Mutant], jobs: int) -> dict[str, int]:
    """Exit codes of the lab's tests for each chosen mutant, spread over ``jobs`` worker processes."""
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
        codes: dict[str, int] = {}
        for out, process in workers:
            _, errors = process.communicate()
            if not out.exists():
                raise RuntimeError(f"a mutant worker died (exit {process.returncode}):\n{errors[-2000:]}")
            for name, code in json.loads(out.read_text()).items():
                codes[files[name]] = max(code, codes.get(files[name], 0))  # the unchanged run: any failure counts
    return codes


def verdict(code: int) -> str:
    # pytest: 0 all passed, 1 some failed (-x stops at the first), 2 interrupted (a timeout can
    # end that way), 3 internal error, 4 usage error, 5 nothing collected.
    if code == 0:
        return "survived"
    if code in (1, 2):
        return "killed"
    return "error"


def report(lab: Path, outcomes: list[Outcome], equivalents: dict[str, str], seconds: float) -> str:
    counts = {s: sum(o.status == s for o in outcomes) for s in ("killed", "survived", "equivalent", "error")}
    judged = counts["killed"] + counts["survived"]
    score = 100.0 * counts["killed"] / judged if judged else 100.0
    lines = [f"{lab.name}: {len(outcomes)} mutants of solution.py in {seconds:.0f} s: {counts['killed']} killed, "
             f"{counts['survived']} survived, {counts['equivalent']} listed as equivalent, {counts['error']} errors",
             f"killed {score:.1f}% of the non-equivalent mutants"]
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
    codes = run(lab, to_run, max(1, options.jobs)) if to_run else {UNCHANGED: 0}
    unchanged = codes.pop(UNCHANGED)
    if unchanged != 0:
        print(f"the lab's tests do not pass on the unchanged solution.py (pytest exit {unchanged}), so no verdict "
              f"on a mutant would mean anything. See why with: LAB_IMPL=solution make lab-{lab_number(lab.name)}")
        return 2
    outcomes = [Outcome(m.id, m.line, "equivalent" if m.id in equivalents else verdict(codes[m.id])) for m in chosen]
    print(report(lab, outcomes, {} if partial else equivalents, time.monotonic() - started))
    # A partial run updates the saved verdicts of what it ran, so --survivors shrinks as tests improve.
    kept = {**last, **{o.id: o for o in outcomes}} if partial else {o.id: o for o in outcomes}
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    saved.write_text(json.dumps({"lab": lab.name, "outcomes": [asdict(o) for o in kept.values()]}, indent=1))
    return 1 if any(o.status in ("survived", "error") for o in outcomes) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
