"""Grade one submission the way Gradescope's ``run_autograder`` does, and write its ``results.json``.

``run_autograder`` (in the autograder zip) runs this module with the autograder's own Python.
The layout is Gradescope's, under ``$AUTOGRADER_ROOT`` (default ``/autograder``, overridable so
``make test`` and ``make grade-batch`` can simulate it anywhere):

- ``source/course``: this course, as ``make autograder`` packed it (reference solutions included);
- ``submission``: what the student uploaded;
- ``results/results.json``: the grade, written here only, at the end, by this trusted process.

Each lab's ``starter.py`` is found at its path in the release (see :mod:`.submission`) and
copied out of the upload; a lab that is missing is graded as a file that does not import, so it
scores 0 with a sentence saying what was looked for. The labs are graded with
``LAB_SANDBOX=1`` (the student's code runs in a sandboxed child process) and
``LAB_COMPOSE=reference`` (a lab that composes others runs over the reference stages, so its
points depend on its own file only). A run that crashes or overruns still leaves a results file
that says so, with 0 points; a stale one is removed first, so an old grade is never re-used.

An autograder built for some labs only (``make autograder LABS=08``, one Gradescope assignment per
lab) carries ``assignment.json`` naming them: only those labs are looked for and graded, and the
grade is whole, out of their points.

``AUTOGRADER_LABS=03,05`` grades those labs only, out of the assignment's. It exists for the
simulation in ``make test`` (to keep it quick) and is written into the result as "not a whole
grade"; a real grade never sets it.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from instructor.autograder.submission import Found, course_labs, locate, missing_lab_module
from mini_vllm.labs import LABS_DIR, REPO_ROOT
from mini_vllm.sandbox.isolation import probe
from mini_vllm.testing.gradescope import results_document, validate
from mini_vllm.testing.policy import VISIBILITIES, load_policy
from mini_vllm.testing.provenance import sha256_of

# One lab at a time: Gradescope's machine may have one core and 768 MB, and a second grading process would hold a
# second copy of the tokenizers. Budgets are CPU time, so `make grade`'s two workers give the same grade.
GRADED_PYTEST = ["-q", "-rN", "-p", "no:warnings", "-p", "no:unraisableexception", "-p", "no:schemathesis",
                 "-p", "no:xdist", "-m", "not control", "--assert=plain", "--no-header", "--tb=no"]
# Gradescope's own limit is set per assignment, up to 40 minutes, and TEACHING.md says to set it to 40: stop 10
# minutes before it, so the "0 points, here is why" result is always written. What a grading takes, per lab, complete
# and with every call looping forever: TEACHING.md's table (python -m bench.autograder_timing --per-lab).
DEFAULT_TIMEOUT_S = 1800
OUTPUT_TAIL = 3000  # characters of pytest's output kept in a crashed run's result
IMPORT_FAILURE = "LabDoesNotImport: "  # how the sandbox reports a lab whose file fails to import (mini_vllm/sandbox)
ASSIGNMENT = REPO_ROOT / "assignment.json"  # written by `make autograder LABS=...`: the labs this assignment grades


def autograder_root() -> Path:
    return Path(os.environ.get("AUTOGRADER_ROOT") or "/autograder")


def assignment_labs() -> list[str]:
    """The lab folders this autograder grades: those ``assignment.json`` names, or every lab of the course."""
    every = course_labs()
    if not ASSIGNMENT.exists():
        return every
    wanted = json.loads(ASSIGNMENT.read_text(encoding="utf-8"))["labs"]
    return [lab for lab in every if lab[:6] in wanted]


def selected_labs(found: list[Found]) -> list[Found]:
    wanted = os.environ.get("AUTOGRADER_LABS", "").replace(",", " ").split()
    return [f for f in found if not wanted or f.number in {w.removeprefix("lab-") for w in wanted}]


def grading_env(files: dict[str, Path]) -> dict[str, str]:
    """The environment of the grading run: the student's files, sandboxed, over the reference stages."""
    # No LAB_CALL_BUDGET_S: each lab's budget is grading.toml's, whatever the caller set.
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("LAB_IMPL", "PYTEST_", "HYPOTHESIS_", "LAB_CALL_BUDGET"))}
    env.update({"LAB_SANDBOX": "1", "LAB_COMPOSE": "reference", "LAB_IMPL": "starter", "PYTHONPATH": str(REPO_ROOT)})
    env.update({f"LAB_IMPL_{lab[4:6]}": str(file) for lab, file in files.items()})
    return env


def submission_note(found: list[Found], graded: list[Found]) -> str:
    lines = [f"Submission: {sum(f.file is not None for f in found)} of {len(found)} labs found."]
    lines += [f"  {f.problem}" for f in found if f.file is None]
    if len(graded) != len(found):
        lines.append(f"Simulation: only {', '.join(f.lab[:6] for f in graded)} graded (AUTOGRADER_LABS); "
                     "this is not a whole grade.")
    return "\n".join(lines)


def submission_record(found: list[Found]) -> dict[str, Any]:
    return {f.lab[:6]: {"looked_for": f.looked_for, "found_at": f.found_at,
                        "sha256": sha256_of(f.file) if f.file is not None else None,
                        "problem": f.problem or None} for f in found}


def crashed_results(reason: str, output: str, found: list[Found]) -> dict[str, Any]:
    """0 points and why, when the grading run left no usable result (so Gradescope never shows an old one).

    The end of the run's output is shown to the student only while grading.toml hides no test: it is pytest's,
    whose scorecard names every test with its first failure and hint, hidden ones too. Otherwise it stays in the
    autograder's stdout, which is then shown no sooner than the most hidden test."""
    policy = load_policy()
    hidden = {policy.visibility, *(rule.visibility for rule in policy.visibility_rules)} - {"visible"}
    tail = output[-OUTPUT_TAIL:] if not hidden else (
        "(not shown here: some tests are hidden for now, and it names every test; your instructor sees it)")
    text = (f"The autograder could not grade this submission: {reason}\n\n{submission_note(found, found)}\n\n"
            f"The end of the grading run's output:\n{tail}")
    document = results_document([], scorecard=text)
    if hidden:
        document["stdout_visibility"] = min({document["stdout_visibility"], *hidden}, key=VISIBILITIES.index)
    document["extra_data"]["autograder"] = {"status": "crashed", "reason": reason}
    document["extra_data"]["submission"] = submission_record(found)
    return document


def grade(root: Path) -> dict[str, Any]:
    results_dir = root / "results"
    results_dir.mkdir(parents=True, exist_ok=True)
    (results_dir / "results.json").unlink(missing_ok=True)
    # The grader's own folder: the copies of the student's files (the sandbox sends the child their text;
    # it never reads them itself) and the grading run's results file. Root's only.
    staging = root / "grading"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(mode=0o700)
    found = locate(root / "submission", staging, assignment_labs())
    walls = probe()
    if not walls.official:  # a grade given without the walls would not be one
        reason = f"this machine cannot wall off the student's code, so it grades nothing: {walls.why}"
        refused = crashed_results(reason, "", found)
        refused["extra_data"]["autograder"]["status"] = "refused"
        return refused
    graded = selected_labs(found)
    files = {f.lab: f.file if f.file is not None else missing_lab_module(f, staging) for f in graded}
    raw_results = staging / "results.json"
    command = [sys.executable, "-m", "pytest", *(str(LABS_DIR / f.lab) for f in graded), *GRADED_PYTEST,
               "--grade", str(raw_results)]
    timeout = float(os.environ.get("AUTOGRADER_TIMEOUT_S") or DEFAULT_TIMEOUT_S)
    started = time.monotonic()
    returncode, output = run_in_own_group(command, REPO_ROOT, grading_env(files), timeout)
    print(output)
    if returncode is None:
        return crashed_results(f"grading did not finish within {timeout:g} s", output, found)
    if returncode not in (0, 1):  # 0: all passed, 1: some failed; anything else means the grade is incomplete
        return crashed_results(f"the grading run stopped early (pytest exit {returncode}), so its points would "
                               "be incomplete", output, found)
    try:
        document = json.loads(raw_results.read_text(encoding="utf-8"))
        validate(document)
    except (OSError, ValueError) as error:  # jsonschema's ValidationError is a ValueError too
        reason = f"the grading run (pytest exit {returncode}) left no valid results ({type(error).__name__})"
        return crashed_results(reason, output, found)
    document["output"] = submission_note(found, graded) + "\n" + _plain_header(document.get("output", ""))
    for entry in document["tests"]:
        if "full scorecard" in entry.get("tags", []):
            entry["output"] = _plain_header(entry["output"])
    document["execution_time"] = round(time.monotonic() - started, 2)
    document["extra_data"]["autograder"] = {"status": "graded", "pytest_exit": returncode,
                                            "assignment": [f.lab[:6] for f in found],
                                            "labs_filter": os.environ.get("AUTOGRADER_LABS") or None}
    document["extra_data"]["submission"] = submission_record(found)
    for lab, status in lab_statuses(graded, document["tests"]).items():
        document["extra_data"]["submission"][lab].update(status)
    say_why_not_graded(document, [f for f in graded if f.file is None])
    return document


def say_why_not_graded(document: dict[str, Any], missing: list[Found]) -> None:
    """A lab with no file of its own ran against a stand-in that fails to import with the reason; its tests and
    the scorecard say the reason alone, not as an import failure of a file the student never wrote."""
    for f in missing:
        stand_in = f"{f.lab[:6]} does not import: ImportError: "
        for entry in document["tests"]:
            if entry["name"].startswith(f.lab + " "):
                entry["output"] = f.problem
            else:
                entry["output"] = entry["output"].replace(stand_in, "")
        document["output"] = document["output"].replace(stand_in, "")


def lab_statuses(found: list[Found], tests: list[dict[str, Any]]) -> dict[str, dict[str, str]]:
    """Per lab, its ``status`` for the batch CSV (a lab at 0 for a reason outside its tests says so) and ``why``:

    ``graded``; ``not found`` (why: what was looked for); ``another lab's file`` (why: whose names it defines);
    ``did not import`` (why: the error, as each of its tests reported it)."""
    statuses = {}
    for f in found:
        outputs = [t["output"] for t in tests if t["name"].startswith(f.lab + " ")]
        if f.other_lab:
            statuses[f.lab[:6]] = {"status": "another lab's file", "why": f.problem}
        elif f.file is None:
            statuses[f.lab[:6]] = {"status": "not found", "why": f.problem}
        elif outputs and all(IMPORT_FAILURE in output for output in outputs):
            statuses[f.lab[:6]] = {"status": "did not import", "why": import_error(outputs[0], f.lab[:6])}
        else:
            statuses[f.lab[:6]] = {"status": "graded", "why": ""}
    return statuses


def import_error(output: str, lab: str) -> str:
    """The first line of the sandbox's report of a lab that did not import, without its own prefixes."""
    line = output[output.index(IMPORT_FAILURE) + len(IMPORT_FAILURE):].splitlines()[0]
    return line.removeprefix(f"{lab} does not import: ").strip()


def _plain_header(scorecard: str) -> str:
    """The scorecard's first line names every LAB_IMPL_NN path of the grader's: say it in the student's terms."""
    header = "Scorecard — your submission: each lab's starter.py (labs that compose others run over the reference)"
    return "\n".join(header if line.startswith("Scorecard — ") else line for line in scorecard.splitlines())


def run_in_own_group(command: list[str], cwd: Path, env: dict[str, str], timeout: float,
                     preexec: Callable[[], None] | None = None) -> tuple[int | None, str]:
    """Run ``command``; on overrun kill it with everything it started. ``(exit status or None, output)``.

    ``preexec`` runs in the new process before the command (batch grading moves it into its CPU group).
    """
    with subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          start_new_session=True, preexec_fn=preexec) as process:
        try:
            output, _ = process.communicate(timeout=timeout)
            return process.returncode, output.decode("utf-8", "replace")
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)  # pytest and any child it left behind
            output, _ = process.communicate()
            return None, output.decode("utf-8", "replace")


def main() -> int:
    root = autograder_root()
    document = grade(root)
    validate(document)
    results = root / "results" / "results.json"
    temporary = results.with_name("results.json.tmp")
    temporary.write_text(json.dumps(document, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    temporary.replace(results)
    status = document["extra_data"]["autograder"]["status"]
    print(f"{results}: {status}, {document['score']} / {document['extra_data']['max_score']} points")
    return 0


if __name__ == "__main__":
    sys.exit(main())
