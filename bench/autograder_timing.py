"""How long the Gradescope autograder takes on every lab, on the submissions that cost the most.

    .venv/bin/python -m bench.autograder_timing            # complete, blank and hanging submissions
    .venv/bin/python -m bench.autograder_timing --only hang
    .venv/bin/python -m bench.autograder_timing --per-lab  # each lab alone: wall, CPU and peak memory
    .venv/bin/python -m bench.autograder_timing --per-lab --labs 10  # lab-10's row only

Each submission is graded by ``run_autograder`` of ``make autograder``'s zip, set up once in an
``/autograder``-shaped root (see ``instructor/autograder/local.py``), exactly as on Gradescope:

- ``complete``: every lab's reference as its starter.py (every test runs to its end);
- ``blank``: the blank starters (each test stops at its first stub);
- ``hang``: every function of every starter loops forever (each call runs out its budget).

``--per-lab`` grades each lab alone (``AUTOGRADER_LABS``: the same tests a one-lab assignment runs), complete
and hanging, and prints TEACHING.md's per-lab table: the wall time, the CPU time of the whole grading
(every process it started, the sandboxed children included) and the peak memory of its processes
together (their resident memory summed, sampled every 0.2 s: the figure Gradescope's memory limit is
closest to; a peak shorter than a sample can be missed), both read from /proc.

Wall-clock numbers, so they live here and not in a test: run it on a loaded machine too, since
that is when Gradescope's own timeout would cut a run. TEACHING.md's recommended Gradescope timeout
and ``run.py``'s own limit (``DEFAULT_TIMEOUT_S``) are set from what this prints.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import subprocess
import threading
import time
from pathlib import Path

from instructor.autograder import local
from instructor.autograder.build import build
from instructor.autograder.run import DEFAULT_TIMEOUT_S
from instructor.contract import looping
from mini_vllm.labs import LABS_DIR, REPO_ROOT

IN_RELEASE = LABS_DIR.relative_to(REPO_ROOT)


def fill(submission: Path, kind: str) -> None:
    for lab in sorted(p for p in LABS_DIR.iterdir() if p.is_dir() and p.name.startswith("lab-")):
        target = submission / IN_RELEASE / lab.name / "starter.py"
        target.parent.mkdir(parents=True, exist_ok=True)
        text = (lab / ("solution.py" if kind == "complete" else "starter.py")).read_text(encoding="utf-8")
        if kind == "hang":
            text = looping(text)
        target.write_text(text, encoding="utf-8")


def tree(root: int) -> dict[tuple[int, str], tuple[int, float]]:
    """Per process below ``root`` (and ``root``), keyed by pid and start time: (bytes resident, CPU seconds so far)."""
    ticks = os.sysconf("SC_CLK_TCK")
    found: dict[tuple[int, str], tuple[int, float]] = {}
    pending, seen = [root], set()
    while pending:
        pid = pending.pop()
        if pid in seen:
            continue
        seen.add(pid)
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            rss = next((int(line.split()[1]) * 1024 for line in Path(f"/proc/{pid}/status").read_text().splitlines()
                        if line.startswith("VmRSS:")), 0)
            found[(pid, fields[19])] = (rss, (int(fields[11]) + int(fields[12])) / ticks)  # utime + stime
        with contextlib.suppress(OSError):
            for task in os.listdir(f"/proc/{pid}/task"):
                with contextlib.suppress(OSError, ValueError):
                    pending += [int(c) for c in Path(f"/proc/{pid}/task/{task}/children").read_text().split()]
    return found


def grade(root: Path, env: dict[str, str]) -> tuple[float, float, int, str]:
    """One run of run_autograder: wall seconds, CPU seconds of everything it ran, peak memory (bytes), last line.

    Both from /proc, sampled every 0.2 s: a process killed inside a sandbox's own PID namespace is reaped
    outside this tree, so the kernel's count of waited-for children (getrusage) would miss its CPU time. Each
    process counts with the last CPU time seen (a process that lived under 0.2 s may be missed)."""
    started = time.monotonic()
    peak = [0]
    cpu: dict[tuple[int, str], float] = {}
    with subprocess.Popen([str(root / "run_autograder")], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True) as process:
        def sample() -> None:
            while process.poll() is None:
                now = tree(process.pid)
                peak[0] = max(peak[0], sum(rss for rss, _ in now.values()))
                cpu.update({key: used for key, (_, used) in now.items()})
                time.sleep(0.2)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        output, _ = process.communicate(timeout=DEFAULT_TIMEOUT_S + 120)
        sampler.join()
    seconds = time.monotonic() - started
    last = output.strip().splitlines()[-1] if output.strip() else ""
    return seconds, sum(cpu.values()), peak[0], last


def per_lab(root: Path, kinds: list[str], only: list[str] | None = None) -> None:
    labs = sorted(p.name for p in LABS_DIR.iterdir() if p.is_dir() and p.name.startswith("lab-")
                  and (not only or p.name[4:6] in only))
    print("| lab | " + " | ".join(f"{kind}: wall s | CPU s | peak MB" for kind in kinds) + " | load |")
    print("|---|" + "---|---|---|" * len(kinds) + "---|")
    for kind in kinds:  # one submission per kind, every lab in it; each lab graded alone
        shutil.rmtree(root / f"submission-{kind}", ignore_errors=True)
        fill(root / f"submission-{kind}", kind)
    for lab in labs:
        cells = []
        for kind in kinds:
            submission = root / "submission"
            shutil.rmtree(submission, ignore_errors=True)
            shutil.copytree(root / f"submission-{kind}", submission)
            env = {**local.grading_env(root), "AUTOGRADER_LABS": lab[4:6]}
            seconds, cpu, peak, last = grade(root, env)
            cells.append(f"{seconds:.0f} | {cpu:.0f} | {peak / 2**20:.0f}")
            if "graded" not in last:
                cells[-1] += f" ({last[-60:]})"
        print(f"| {lab[:6]} | " + " | ".join(cells) + f" | {os.getloadavg()[0]:.1f} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=("complete", "blank", "hang"), action="append")
    parser.add_argument("--per-lab", action="store_true", help="each lab graded alone: TEACHING.md's table")
    parser.add_argument("--labs", type=lambda text: [n.strip().zfill(2) for n in text.split(",")],
                        help="with --per-lab: these labs' rows only (e.g. 10 or 03,10)")
    args = parser.parse_args()
    kinds = args.only or (["complete", "hang"] if args.per_lab else ["complete", "blank", "hang"])
    scratch = local.scratch_dir("bench-autograder-")
    try:
        root = scratch / "autograder"
        local.install(build(scratch / "autograder.zip"), root)
        print(f"load average before: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; "
              f"run.py's own limit {DEFAULT_TIMEOUT_S} s")
        if args.per_lab:
            per_lab(root, kinds, args.labs)
            return
        for kind in kinds:
            submission = root / "submission"
            shutil.rmtree(submission, ignore_errors=True)
            submission.mkdir()
            fill(submission, kind)
            seconds, cpu, peak, last = grade(root, local.grading_env(root))
            print(f"{kind:<9} {seconds:7.1f} s  CPU {cpu:6.1f} s  peak {peak / 2**20:5.0f} MB  "
                  f"load {os.getloadavg()[0]:4.1f}  {last}", flush=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
