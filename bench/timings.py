"""Measure the commands of the README's timing table, here, and compare with what it says.

    make timings            # the warm column: make grade, one make lab-NN per lab, make test, make check
    make timings ARGS=--no-test   # skip make test and make check (the slow ones)

Wall-clock numbers belong here, not in the test suite (no test is timed). Run this
before editing the README's table, and on the machine the table names (2 cores): a row
whose README figure is more than a third off what was just measured is flagged, so the
table cannot drift quietly. Every lab is timed against the reference solutions, where
every test runs to the end (a starter stops at its first stub, which is faster).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass

from mini_vllm.labs import LABS_DIR, REPO_ROOT, lab_number

README = REPO_ROOT / "README.md"
# The budgets for a warm .venv on the 2-core course machine: make test is the developers' loop
# (issue 33: 3 minutes), make check everything CI runs (10 minutes).
BUDGET_S = {"make grade": 45.0, "make lab-NN": 5.0, "make test": 180.0, "make check": 600.0}
TOLERANCE = 1 / 3


@dataclass(frozen=True)
class Timing:
    command: str
    seconds: float
    exit_code: int


def run(command: str) -> Timing:
    # Started from `make timings`, the environment carries that make's flags and variables
    # (ARGS among them): drop them so each command runs as a student would type it.
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "ARGS")}
    started = time.perf_counter()
    done = subprocess.run(command, shell=True, cwd=REPO_ROOT, env=env, stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL)
    return Timing(command, time.perf_counter() - started, done.returncode)


def readme_seconds(row: str) -> float | None:
    """The warm figure the README's table gives for the row whose command starts with ``row``."""
    for line in README.read_text(encoding="utf-8").splitlines():
        if line.startswith(f"| `{row}"):
            line = re.sub(r"\s*<!--.*?-->\s*$", "", line)  # an instructor-only row's marker after the table's cells
            # A range ("1 min 26 s to 1 min 55 s", "4.7–5.5 s") is judged by its upper end.
            warm = re.split(r" to |–", line.rstrip(" |").split("|")[-1])[-1]
            minutes = re.search(r"(\d+) min", warm)
            seconds = re.search(r"([\d.]+) s\b", warm)
            return (int(minutes.group(1)) * 60 if minutes else 0) + (float(seconds.group(1)) if seconds else 0)
    return None


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-test", action="store_true", help="skip `make test` and `make check`")
    options = parser.parse_args(argv)
    labs = sorted(lab_number(d.name) for d in LABS_DIR.iterdir() if d.name.startswith("lab-"))
    run("make -s install")  # the warm column: nothing left to install
    # (README row, budget row, timing): the README has one row for the slowest lab.
    timings = [("make grade", "make grade", run("make -s grade"))]
    lab_timings = [run(f"LAB_IMPL=solution make -s lab-{n}") for n in labs]
    timings += [("make lab-", "make lab-NN", t) for t in lab_timings]
    if not options.no_test:
        timings.append(("make test", "make test", run("make -s test")))
        timings.append(("make check", "make check", run("make -s check")))
    slowest_lab = max(lab_timings, key=lambda t: t.seconds)
    print(f"{'command':<44} {'measured':>9} {'budget':>7}  README")
    over = False
    for row, budget_row, timing in timings:
        flags = []
        if timing.seconds > BUDGET_S[budget_row]:
            flags.append("OVER BUDGET")
            over = True
        said = readme_seconds(row)
        if said is not None and (budget_row != "make lab-NN" or timing is slowest_lab) \
                and abs(said - timing.seconds) > TOLERANCE * timing.seconds:
            flags.append(f"README says {said:g} s")
        # Fresh starters fail `make grade` (exit 2); everything else runs the reference and must pass.
        failed = timing.exit_code != 0 and not (row == "make grade" and timing.exit_code == 2)
        label = timing.command.replace("make -s ", "make ") + (" (FAILED)" if failed else "")
        print(f"{label:<44} {timing.seconds:8.1f}s {BUDGET_S[budget_row]:6.0f}s  {'; '.join(flags) or 'ok'}")
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
