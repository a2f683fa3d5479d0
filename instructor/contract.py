"""Run one lab's tests in pytest processes of their own and read back what happened.

The course-contract tests grade each lab many times with the grading plugin, the way a
student's run is graded: :func:`run_jobs` grades a batch (the blank starter, the canary, wrong
variants) one after another in one child process; :func:`run_lab_tests` runs a lab once, with
the options a student passes, as ``make lab-03 ARGS=...`` would.
"""

from __future__ import annotations

import json
import os
import pwd
import re
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from instructor.variants import Job
from mini_vllm.labs import REPO_ROOT

# A stub of a starter (``raise NotImplementedError`` and what follows it on its line, or lines).
STUB = re.compile(r"^([ \t]*)(raise NotImplementedError)", re.M)


def looping(starter: str) -> str:
    """A starter's text with every stub looping forever before it raises: each call runs out of its budget (the
    slowest honest-looking submission, which the grader must stop and name)."""
    return STUB.sub(r"\1while True:  # hangs\n\1    pass\n\1\2", starter)


@dataclass(frozen=True)
class LabRun:
    returncode: int
    tests: list[dict[str, Any]]  # the results.json entries (graded tests only)
    output: str  # what pytest printed
    results: dict[str, Any] = field(default_factory=dict)  # the whole results.json ({} if none was written)

    def failed(self, test_name: str) -> list[dict[str, Any]]:
        """Entries for ``test_name`` (all its parametrizations) that lost points."""
        return [t for t in self.named(test_name) if t["score"] < t["max_score"]]

    def named(self, test_name: str) -> list[dict[str, Any]]:
        return [t for t in self.tests if re.fullmatch(rf"{re.escape(test_name)}(\[.*\])?", t["name"].split(" › ")[-1])]


def task_of(entry: dict[str, Any]) -> int:
    """The task number of a results.json entry (named ``lab › task N › test``)."""
    return int(entry["name"].split(" › ")[1].removeprefix("task "))


def _child_env(env: dict[str, str]) -> dict[str, str]:
    inherited = ("LAB_IMPL", "PYTEST_XDIST", "PYTEST_CURRENT")  # the child chooses its own code and workers
    child_env = {k: v for k, v in os.environ.items() if not k.startswith(inherited)}
    child_env.update(env)
    return child_env


def _name_of(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def run_jobs(lab_dir: Path, jobs: Sequence[Job], timeout: int = 900, as_user: Sequence[str] = (),
             owner: int | None = None, course: Path = REPO_ROOT) -> dict[str, LabRun]:
    """Grade ``lab_dir`` once per job, all in a single child process (see :mod:`instructor.variants`).

    ``as_user`` prefixes the command (a grading run by an ordinary user, ``owner``, in its own copy ``course``).
    """
    with tempfile.TemporaryDirectory() as scratch:
        out = Path(scratch)
        (out / "jobs.json").write_text(json.dumps([job.to_json() for job in jobs]), encoding="utf-8")
        if owner is not None:
            os.chown(out, owner, owner)
        command = [*as_user, sys.executable, "-m", "instructor.variants", str(lab_dir), str(out)]
        user = {} if owner is None else {"HOME": str(out), "USER": _name_of(owner), "LOGNAME": _name_of(owner)}
        env = _child_env(user)
        done = subprocess.run(command, cwd=course, env=env, capture_output=True, text=True, timeout=timeout)
        runs = {}
        for job in jobs:
            results, exit_file = out / f"{job.name}.json", out / f"{job.name}.exit"
            summary = json.loads(results.read_text(encoding="utf-8")) if results.exists() else {}
            code = json.loads(exit_file.read_text()) if exit_file.exists() else done.returncode
            section = done.stdout.split(f"=== job {job.name}\n")[-1].split("=== job ")[0]
            if not exit_file.exists():  # the child died on this job: its last words are on stderr
                section += f"\n[the grading process ended early (exit {done.returncode})]\n{done.stderr}"
            runs[job.name] = LabRun(code, summary.get("tests", []), section, summary)
    return runs


def run_lab_tests(lab_dir: Path, env: dict[str, str], timeout: int = 600, args: Sequence[str] = ()) -> LabRun:
    """Run the tests of ``lab_dir`` with the grading plugin on, under the given environment additions.

    ``args`` are extra pytest options (``-k flush``), as a student passes them in ``ARGS``.
    """
    child_env = _child_env(env)
    child_env.setdefault("HYPOTHESIS_PROFILE", "ci")
    with tempfile.TemporaryDirectory() as scratch:
        results = Path(scratch) / "results.json"
        command = [sys.executable, "-m", "pytest", str(lab_dir), "-q", "--tb=no", "-p", "no:randomly",
                   "--timeout", "120", "--assert=plain", "-p", "no:schemathesis", "--grade", str(results), *args]
        done = subprocess.run(command, cwd=REPO_ROOT, env=child_env, capture_output=True, text=True, timeout=timeout)
        summary = json.loads(results.read_text(encoding="utf-8")) if results.exists() else {}
    return LabRun(done.returncode, summary.get("tests", []), done.stdout + done.stderr, summary)
