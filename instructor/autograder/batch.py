"""``make grade-batch SUBMISSIONS=dir``: grade a whole class, one student at a time in a fresh copy, in parallel.

``SUBMISSIONS`` holds one entry per student: a folder (their copy of the course, as they would
upload it to Gradescope) or a ``.zip`` of it. Gradescope's export of an assignment's submissions
has this layout (one folder per submission, with ``submission_metadata.yml`` beside them); the CSV
takes each submitter's name, email and SID from that file, or from a ``submission_metadata.json``
(the autograder's form) in a folder it does not name, and otherwise the folder's name is all it
knows of the student. Each student is
graded exactly as the Gradescope autograder grades (``run_autograder`` of ``make autograder``'s
zip) in a root of their own: a fresh copy of the course and of their submission, so nothing one
student's code does can reach another's grading. Students are graded in parallel, one per core
(``--jobs``). Only the grader's own ``results.json`` is read back, never anything the submission wrote.

Students graded side by side get equal CPU shares where the machine allows (:mod:`.shares`), and,
budgets being CPU time, a neighbour never costs a student points (only time).

Writes ``build/batch/scores.csv`` (a row per student: submission, name, email, SID, status, total,
each lab and task; a lab that was not found or did not import is named in the status) and
``build/batch/<student>/results.json`` and ``stdout.txt``. A student whose grading crashed or
overran gets a row that says so, with no points.
"""

from __future__ import annotations

import argparse
import csv
import functools
import json
import os
import re
import shutil
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from instructor.autograder import local, shares
from instructor.autograder.build import BuildError, build, chosen_labs
from instructor.autograder.metadata import METADATA, Submitter, metadata_warnings, who_submitted
from instructor.autograder.run import run_in_own_group
from mini_vllm.labs import REPO_ROOT, lab_number
from mini_vllm.sandbox.isolation import probe
from mini_vllm.testing.policy import load_policy

DEFAULT_OUT = REPO_ROOT / "build" / "batch"
DEFAULT_TIMEOUT_S = 2100  # per student: past the autograder's own limit (run.py's 1800 s), which writes a result


@dataclass(frozen=True)
class Outcome:
    student: str
    status: str  # "graded", or what went wrong
    results: dict[str, Any] | None
    seconds: float


def students(submissions: Path) -> list[tuple[str, Path]]:
    """``(name, entry)`` per student: each folder or ``.zip`` directly in ``submissions``."""
    entries = sorted(p for p in submissions.iterdir()
                     if not p.name.startswith(".") and (p.is_dir() or p.suffix == ".zip"))
    named = [(re.sub(r"[^\w.@-]", "_", p.stem if p.suffix == ".zip" else p.name), p) for p in entries]
    duplicates = sorted({n for n, _ in named if [m for m, _ in named].count(n) > 1})
    if duplicates:
        raise SystemExit(f"grade-batch: two submissions would share the name(s) {duplicates} (a folder and a zip?)")
    return named


def prepare_template(work: Path, labs: list[str] | None = None) -> Path:
    """The autograder built, unpacked and set up once in ``work`` (its ``/autograder`` minus a submission):
    ``make autograder LABS=...``'s for ``labs`` (lab folders), the whole course's without."""
    template = work / "template"
    archive = build(work / "autograder.zip", labs)
    archive.chmod(0o600)  # the reference solutions are inside: root's (the grader's) only
    local.install(archive, template)
    return template


def grade_one(student: str, entry: Path, template: Path, work: Path, out: Path, timeout: float,
              labs: str | None, cpu: shares.Shares | None = None) -> Outcome:
    """Grade one student in a fresh root (and CPU group); runs in a worker process of the pool."""
    started = time.monotonic()
    group = cpu.group(student) if cpu is not None else None
    root = Path(tempfile.mkdtemp(prefix=f"{student}-", dir=work))  # a random name: not guessable by others
    root.chmod(0o711)
    student_out = out / student
    shutil.rmtree(student_out, ignore_errors=True)
    student_out.mkdir(parents=True, mode=0o700)
    try:
        shutil.copytree(template / "source", root / "source", symlinks=True)  # keeps setup.sh's permissions
        shutil.copy2(template / "run_autograder", root / "run_autograder")
        (root / "venv").symlink_to(os.readlink(template / "venv"))
        submission = root / "submission"
        if entry.is_dir():
            shutil.copytree(entry, submission, symlinks=True,  # links stay links: the grader refuses them
                            ignore=lambda folder, names: [METADATA] if Path(folder) == entry else [])
        else:
            submission.mkdir()
            shutil.copy2(entry, submission / entry.name)
        submission.chmod(0o700)
        env = local.grading_env(root, labs)
        returncode, output = run_in_own_group([str(root / "run_autograder")], root, env, timeout,
                                              preexec=functools.partial(shares.join, group))
        (student_out / "stdout.txt").write_text(output, encoding="utf-8")
        if returncode is None:
            return Outcome(student, f"crashed: grading did not finish within {timeout:g} s", None,
                           time.monotonic() - started)
        results_file = root / "results" / "results.json"
        try:
            results = json.loads(results_file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return Outcome(student, f"crashed: run_autograder (exit {returncode}) wrote no results.json", None,
                           time.monotonic() - started)
        shutil.copyfile(results_file, student_out / "results.json")
        return Outcome(student, graded_status(results), results, time.monotonic() - started)
    except Exception as error:  # one student's trouble must not stop the class's grading
        return Outcome(student, f"crashed: {type(error).__name__}: {error}", None, time.monotonic() - started)
    finally:
        shares.end(group)  # whatever the grading left running, a spinner in a session of its own included
        shutil.rmtree(root, ignore_errors=True)


def graded_status(results: dict[str, Any]) -> str:
    """What happened, in the student's words. One lab: ``graded``, ``did not import: why``, ``no file for lab-03
    found`` or ``a file of another lab: why``; several: ``graded``, then each lab that was not (``graded; lab-05 did
    not import: why; no file for lab-06 found``). ``crashed: why`` when no grade was given."""
    extra = results.get("extra_data", {})
    autograder = extra.get("autograder", {})
    if autograder.get("status") != "graded":
        return f"crashed: {autograder.get('reason', '?')}"
    labs = extra.get("submission", {})
    trouble = [lab_status(lab, entry, named=len(labs) > 1) for lab, entry in sorted(labs.items())
               if entry.get("status", "graded") != "graded"]
    if len(labs) == 1 and trouble:
        return trouble[0]
    return "; ".join(["graded", *trouble])


def lab_status(lab: str, entry: dict[str, Any], named: bool) -> str:
    """One lab that was not graded, in the student's words; ``named``: the lab's name first (several labs)."""
    status, why = entry.get("status", ""), str(entry.get("why") or "")
    if status == "not found":
        return f"no file for {lab} found"
    if status == "another lab's file":
        why = why.split(" is a file of another lab: ", 1)[-1].split(". Upload ", 1)[0]
        return f"{lab}: a file of another lab: {why}" if named else f"a file of another lab: {why}"
    said = f"did not import: {why}" if why else "did not import"
    return f"{lab} {said}" if named else said


def is_graded(outcome: Outcome) -> bool:
    """Whether the autograder gave a grade (a 0 included), as opposed to crashing or being stopped."""
    autograder = (outcome.results or {}).get("extra_data", {}).get("autograder", {})
    return autograder.get("status") == "graded"


def columns(outcomes: list[Outcome]) -> list[str]:
    """lab-NN and lab-NN task N columns: every lab and task any result has, in the course's order."""
    tasks: dict[str, set[str]] = {}
    for outcome in outcomes:
        for lab, entry in ((outcome.results or {}).get("extra_data", {}).get("labs", {})).items():
            tasks.setdefault(lab, set()).update(entry.get("tasks", {}))
    ordered = []
    for lab in sorted(tasks, key=lab_number):
        ordered.append(lab)
        ordered += [f"{lab} task {task}" for task in sorted(tasks[lab], key=int)]
    return ordered


def row(outcome: Outcome, lab_columns: list[str], who: Submitter) -> dict[str, Any]:
    results = outcome.results or {}
    extra = results.get("extra_data", {})
    graded = is_graded(outcome)
    values: dict[str, Any] = {"submission": outcome.student, "name": who.name, "email": who.email, "sid": who.sid,
                              "status": outcome.status, "total": results.get("score", 0) if graded else 0,
                              "max": extra.get("max_score", ""), "tests_version": extra.get("tests_version", ""),
                              "commit": extra.get("commit", ""), "seconds": round(outcome.seconds, 1)}
    labs = extra.get("labs", {}) if graded else {}
    for column in lab_columns:
        lab, _, task = column.partition(" task ")
        entry = labs.get(lab, {})
        if task:
            entry = entry.get("tasks", {}).get(task, {})
        values[column] = entry.get("score", 0 if graded else "")
    return values


def write_csv(outcomes: list[Outcome], path: Path, who: dict[str, Submitter] | None = None) -> None:
    """One row per submission; ``who`` maps a submission's name to its submitters (from Gradescope's metadata)."""
    who = who or {}
    lab_columns = columns(outcomes)
    fields = ["submission", "name", "email", "sid", "status", "total", "max", *lab_columns, "tests_version",
              "commit", "seconds"]
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=fields)
        writer.writeheader()
        for outcome in sorted(outcomes, key=lambda o: o.student):
            writer.writerow(row(outcome, lab_columns, who.get(outcome.student, Submitter())))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("submissions", type=Path, help="a folder with one folder or .zip per student")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="students graded at once (cores)")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S, help="seconds per student")
    parser.add_argument("--labs", default=None, help="grade as `make autograder LABS=...`'s assignment does (e.g. "
                        "03 for a per-lab export: a lone starter.py is lab-03's, out of lab-03's points); default: "
                        "the whole course")
    args = parser.parse_args(argv)
    if not args.submissions.is_dir():
        raise SystemExit(f"grade-batch: SUBMISSIONS={args.submissions} is not a folder")
    class_list = students(args.submissions)
    if not class_list:
        raise SystemExit(f"grade-batch: no student folder or .zip in {args.submissions}")
    try:
        labs = chosen_labs(args.labs) if args.labs else None
    except BuildError as error:
        raise SystemExit(f"grade-batch: {error}") from None
    warnings = metadata_warnings(args.submissions, class_list)
    for warning in warnings:
        print(warning, file=sys.stderr)
    walls = probe()
    if not walls.official:
        raise SystemExit(f"grade-batch: refusing to grade: this machine cannot wall off students' code ({walls.why})")
    args.out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    work = local.scratch_dir("grade-batch-")
    cpu = shares.open_shares(f"grade-batch-{os.getpid()}")
    print(cpu.describe())
    try:
        template = prepare_template(work, labs)
        with ProcessPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            futures = [pool.submit(grade_one, name, entry.resolve(), template, work, args.out, args.timeout,
                                   None, cpu) for name, entry in class_list]
            outcomes = [future.result() for future in futures]
    finally:
        cpu.close()
        shutil.rmtree(work, ignore_errors=True)
    write_csv(outcomes, args.out / "scores.csv", who_submitted(args.submissions, class_list))
    for outcome in outcomes:
        score = outcome.results.get("score") if outcome.results and is_graded(outcome) else "-"
        print(f"{outcome.student:<24} {score!s:>6}  {outcome.status:.100}")
    graded_as = f"as {', '.join(lab[:6] for lab in labs)}'s autograder" if labs else "on every lab"
    print(f"{len(outcomes)} students graded {graded_as} in {time.monotonic() - started:.1f} s "
          f"(tests version {load_policy().tests_version}): {args.out / 'scores.csv'}")
    for warning in warnings:  # again at the end, where they are seen
        print(warning, file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
