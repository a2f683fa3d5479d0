"""How long the Gradescope autograder takes on every lab, on the submissions that cost the most.

    .venv/bin/python -m bench.autograder_timing            # complete, blank and hanging submissions
    .venv/bin/python -m bench.autograder_timing --only hang

Each submission is graded by ``run_autograder`` of ``make autograder``'s zip, set up once in an
``/autograder``-shaped root (see ``instructor/autograder/local.py``), exactly as on Gradescope:

- ``complete``: every lab's reference as its starter.py (every test runs to its end);
- ``blank``: the blank starters (each test stops at its first stub);
- ``hang``: every function of every starter loops forever (each call runs out its budget).

Wall-clock numbers, so they live here and not in a test: run it on a loaded machine too, since
that is when Gradescope's own timeout would cut a run. TEACHING.md's recommended Gradescope timeout
and ``run.py``'s own limit (``DEFAULT_TIMEOUT_S``) are set from what this prints.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

from instructor.autograder import local
from instructor.autograder.build import build
from instructor.autograder.run import DEFAULT_TIMEOUT_S
from mini_vllm.labs import LABS_DIR, REPO_ROOT

IN_RELEASE = LABS_DIR.relative_to(REPO_ROOT)
STUB = re.compile(r"^([ \t]*)(raise NotImplementedError)", re.M)


def fill(submission: Path, kind: str) -> None:
    for lab in sorted(p for p in LABS_DIR.iterdir() if p.is_dir() and p.name.startswith("lab-")):
        target = submission / IN_RELEASE / lab.name / "starter.py"
        target.parent.mkdir(parents=True, exist_ok=True)
        text = (lab / ("solution.py" if kind == "complete" else "starter.py")).read_text(encoding="utf-8")
        if kind == "hang":
            text = STUB.sub(r"\1while True: pass  # hangs: each call runs out its budget\n\1\2", text)
        target.write_text(text, encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=("complete", "blank", "hang"), action="append")
    kinds = parser.parse_args().only or ["complete", "blank", "hang"]
    scratch = local.scratch_dir("bench-autograder-")
    try:
        root = scratch / "autograder"
        local.install(build(scratch / "autograder.zip"), root)
        print(f"load average before: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; "
              f"run.py's own limit {DEFAULT_TIMEOUT_S} s")
        for kind in kinds:
            submission = root / "submission"
            shutil.rmtree(submission, ignore_errors=True)
            submission.mkdir()
            fill(submission, kind)
            started = time.monotonic()
            done = subprocess.run([str(root / "run_autograder")], env=local.grading_env(root), capture_output=True,
                                  text=True, timeout=DEFAULT_TIMEOUT_S + 120)
            seconds = time.monotonic() - started
            last = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else done.stderr[-300:]
            print(f"{kind:<9} {seconds:7.1f} s  load {os.getloadavg()[0]:4.1f}  {last}")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
