"""``results.json`` in Gradescope's autograder format, stamped with what produced it.

The format (Gradescope's "Autograder Specifications", output format): a top-level ``score``,
``execution_time``, ``output`` with its ``output_format``, ``visibility`` and
``stdout_visibility``, ``extra_data``, and ``tests[]``, each with ``name``, ``number``,
``score``, ``max_score``, ``status``, ``output``, ``tags`` and ``visibility``.
``gradescope_results.schema.json`` (next to this module) is that specification as a JSON
Schema; the course's tests validate every results file they read against it.

``extra_data`` says what produced the grade: the course version and commit, the tests'
version (``grading.toml``), each graded file's and each test file's sha256, how the code under
test was isolated, and the per-lab and per-task points (batch grading's CSV reads those).
"""

from __future__ import annotations

import json
import os
import platform
import re
import sys
from collections import defaultdict
from collections.abc import Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any, Protocol

from mini_vllm.labs import REPO_ROOT, describe_choice, impl_path, lab_dir, lab_number
from mini_vllm.testing.policy import VISIBILITIES, load_policy, test_id
from mini_vllm.testing.provenance import course_commit, course_version, file_record, read_build_info, walls

SCHEMA_PATH = Path(__file__).with_name("gradescope_results.schema.json")
# Text that reaches a scorecard or results.json may hold a student's words (an exception's message,
# a value a test shows). Terminal escapes (colours, cursor moves, a title change), other control
# characters and bidirectional overrides are taken out, and the whole is cut to a length.
_ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[ -~]?|\x9b[0-?]*[ -/]*[@-~]")
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")
MAX_TEST_OUTPUT = 16_000  # characters of one test's output: its rule, the first wrong step, and plenty of table
MAX_OUTPUT = 200_000  # the scorecard's
_DECIMALS = 4  # points are exact fractions until here; Gradescope shows two decimals


class ResultTest(Protocol):
    """What the writer needs of a graded test (the grading plugin's ``GradedTest``)."""

    lab: str
    task: int
    task_title: str
    name: str
    passed: bool | None
    weight: Fraction
    composes: tuple[str, ...]
    details: str


def results_document(tests: Sequence[ResultTest], scorecard: str, partial: str = "",
                     execution_time: float = 0.0, full_scorecard: str | None = None,
                     call_costs: dict[str, Any] | None = None) -> dict[str, Any]:
    """The whole results file for ``tests`` (each scored: its weight when passed, else 0).

    ``scorecard`` is the top-level output, which Gradescope shows the student; when a visibility rule
    hides some tests it is built from the others, and ``full_scorecard`` (every test) goes into an entry
    of its own, worth nothing, shown only when the last of the hidden tests shows.
    """
    policy = load_policy()
    entries = []
    per_task_index: dict[tuple[str, int], int] = defaultdict(int)
    for test in tests:
        per_task_index[test.lab, test.task] += 1
        number = f"{int(lab_number(test.lab))}.{test.task}.{per_task_index[test.lab, test.task]}"
        entries.append({
            "name": f"{test.lab} › task {test.task} › {test.name}",
            "number": number,
            "score": _points(test.weight if test.passed else Fraction(0)),
            "max_score": _points(test.weight),
            "status": "passed" if test.passed else "failed",
            "output": "" if test.passed else printable(test.details or "failed (no message was recorded)"),
            "tags": [f"composes {lab}" for lab in test.composes],
            "visibility": policy.visibility_of(test_id(test.lab, test.task, test.name)),
        })
    stdout_visibility = policy.stdout_visibility
    if full_scorecard is not None:
        hidden = {str(entry["visibility"]) for entry in entries} - {"visible"}
        if stdout_visibility == "visible":  # the grading run's output prints every test's result
            stdout_visibility = min(hidden, key=VISIBILITIES.index)
        entries.append({
            "name": "Scorecard of every test (the instructor's; it includes the hidden tests)",
            "number": "0",
            "score": 0,
            "max_score": 0,
            "status": "passed",
            "output": full_scorecard,
            "tags": ["full scorecard"],
            "visibility": min(hidden, key=VISIBILITIES.index),  # shown no sooner than any hidden test
        })
    earned = sum((t.weight for t in tests if t.passed), Fraction(0))
    total = sum((t.weight for t in tests), Fraction(0))
    return {
        "score": _points(earned),
        "execution_time": round(execution_time, 2),
        "output": printable(scorecard, MAX_OUTPUT),
        "output_format": "text",  # the scorecard is aligned plain text: no HTML or Markdown
        "test_output_format": "text",
        "test_name_format": "text",
        "visibility": policy.visibility,
        "stdout_visibility": stdout_visibility,
        "extra_data": _extra_data(tests, total, partial, call_costs),
        "tests": entries,
    }


def printable(text: str, limit: int = MAX_TEST_OUTPUT) -> str:
    """``text`` without terminal escapes or control characters (newlines and tabs stay), at most ``limit`` long."""
    text = _CONTROLS.sub("", _ESCAPES.sub("", text.replace("\r\n", "\n")))
    if len(text) > limit:
        text = text[:limit] + f"\n… (cut: {len(text) - limit:,} more characters)"
    return text


def write_results(path: Path, tests: Sequence[ResultTest], scorecard: str, partial: str = "",
                  execution_time: float = 0.0, full_scorecard: str | None = None,
                  call_costs: dict[str, Any] | None = None) -> dict[str, Any]:
    """``call_costs``: what the gradings' calls cost (:func:`call_costs_here`, or merged from pytest-xdist's
    workers)."""
    document = results_document(tests, scorecard, partial, execution_time, full_scorecard, call_costs)
    path.parent.mkdir(parents=True, exist_ok=True)
    # Written whole to a temporary name, then renamed: a reader never sees half a file.
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(json.dumps(document, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    temporary.replace(path)
    return document


def _extra_data(tests: Sequence[ResultTest], total: Fraction, partial: str,
                call_costs: dict[str, Any] | None) -> dict[str, Any]:
    policy = load_policy()
    labs = sorted({t.lab for t in tests})
    composed = sorted({c for t in tests for c in t.composes} - {f"lab-{lab_number(lab)}" for lab in labs})
    walled = walls()
    return {
        "max_score": _points(total),
        "partial_run": partial or None,
        "course_version": course_version(),
        "commit": course_commit(),
        "build": read_build_info(),
        "tests_version": policy.tests_version,
        "implementation": describe_choice(),
        "lab_compose": os.environ.get("LAB_COMPOSE") or None,
        "isolation": walled[0],
        "official": walled[1],
        "python": platform.python_version(),
        "labs": _lab_points(tests),
        "call_costs": call_costs,
        "files": {
            "graded": {f"lab-{lab_number(lab)}": _graded_file(lab) for lab in [*labs, *composed]},
            "tests": {f"lab-{lab_number(lab)}": file_record(lab_dir(lab) / "test_lab.py") for lab in labs},
            "harness": {name: file_record(REPO_ROOT / name) for name in ("conftest.py", "grading.toml")
                        if (REPO_ROOT / name).exists()},
        },
    }


def call_costs_here() -> dict[str, Any] | None:
    """Per sandboxed lab graded in this process: its calls, the one that used the most CPU, and its budget
    (None: nothing was sandboxed)."""
    remote = sys.modules.get("mini_vllm.sandbox.remote")
    return remote.call_costs() or None if remote is not None else None


# The figures of remote.call_costs() that are a most over the gradings (the rest: calls, which add up; the
# slowest call with its CPU time, taken together; whether CPU time was measured, the same everywhere).
_LARGEST = ("budget_cpu_s", "largest_message_bytes", "most_bytes_in_a_test", "most_served_cpu_s_in_a_test")


def merge_call_costs(parts: Sequence[dict[str, Any] | None]) -> dict[str, Any] | None:
    """The call costs of several processes' gradings (pytest-xdist's workers) as one process's would read.

    A lab's tests run in one worker, but another lab's tests may call it from the other.
    """
    merged: dict[str, dict[str, Any]] = {}
    for part in parts:
        for lab, cost in (part or {}).items():
            mine = merged.get(lab)
            if mine is None:
                merged[lab] = dict(cost)
                continue
            mine["calls"] += cost["calls"]
            for key in _LARGEST:
                mine[key] = max(mine[key], cost[key])
            if cost["slowest_cpu_s"] > mine["slowest_cpu_s"] or mine["slowest_call"] is None:
                mine["slowest_call"], mine["slowest_cpu_s"] = cost["slowest_call"], cost["slowest_cpu_s"]
    return dict(sorted(merged.items())) or None


def _lab_points(tests: Sequence[ResultTest]) -> dict[str, Any]:
    """Per lab and task: score and max_score (what a batch's CSV and a gradebook need)."""
    labs: dict[str, Any] = {}
    for test in tests:
        lab = labs.setdefault(f"lab-{lab_number(test.lab)}", {"folder": test.lab, "score": Fraction(0),
                                                             "max_score": Fraction(0), "tasks": {}})
        task = lab["tasks"].setdefault(str(test.task), {"title": test.task_title, "score": Fraction(0),
                                                        "max_score": Fraction(0)})
        for entry in (lab, task):
            entry["max_score"] += test.weight
            entry["score"] += test.weight if test.passed else 0
    for lab in labs.values():
        for entry in (lab, *lab["tasks"].values()):
            entry["score"], entry["max_score"] = _points(entry["score"]), _points(entry["max_score"])
    return labs


def _graded_file(lab: str) -> dict[str, str | None]:
    try:
        return file_record(impl_path(lab))
    except (FileNotFoundError, LookupError) as error:
        return {"path": None, "sha256": None, "error": str(error)}


def _points(points: Fraction) -> float | int:
    """A JSON number: whole points as an integer, else rounded to a few decimals."""
    return points.numerator if points.denominator == 1 else round(float(points), _DECIMALS)


def validate(document: dict[str, Any]) -> None:
    """Raise ``jsonschema.ValidationError`` unless ``document`` follows Gradescope's format."""
    import jsonschema  # only the course's tests and the autograder's own check need it

    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    jsonschema.validate(document, schema)
