"""What one graded test came to, and how its failure reads: the grading plugin's value types.

A :class:`GradedTest` is one test's place in the grade (lab, task, points, weight) and its verdict.
Under pytest-xdist (``make grade`` runs two labs at once) the tests run in worker processes and the
scorecard is printed by the controlling one, so a test's verdict crosses as data: :func:`verdict`
rides on the test's report, and :func:`collected` / :func:`from_collected` carry what a worker
collected (every worker collects every test) in its ``workeroutput``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from mini_vllm.labs import lab_number
from mini_vllm.testing.trace import FIRST_WRONG_STEP


@dataclass
class GradedTest:
    lab: str  # the lab folder name
    task: int
    task_title: str
    name: str
    points: int
    passed: bool | None = None  # None: selected but never ran to a verdict (-x stopped the run, a skip)
    control: bool = False  # proves a bug is real; reported with max_score 0, never graded
    composes: tuple[str, ...] = ()  # other labs this test runs (their code can fail first)
    details: str = ""  # the whole exception message, for results.json ("" when passed)
    weight: Fraction = Fraction(0)  # what it is worth under grading.toml (its task's weight, shared)

    @property
    def hint(self) -> list[str]:
        return failure_hint(self.details, f"lab-{lab_number(self.lab)}", self.task)


@dataclass
class NotGraded:
    """A test left out of this run's grade: it counts inside the lab's process, and the lab runs sandboxed."""

    task: int
    why: str
    cases: int = 0


def quoted_if_foreign(error: BaseException, text: str) -> str:
    """An exception raised by graded code: its words quoted, so none of its lines reads as the grader's.

    It came back from the sandbox (it carries ``sandbox_traceback``, the student's frames, which
    stay as they are after the message). Its first line says whose it is: "your code raised
    ValueError: ...", and any further line of the message is indented behind a bar.
    """
    if not hasattr(error, "sandbox_traceback"):
        return text
    trace = getattr(error, "sandbox_traceback", "") or ""
    at = text.find(trace) if trace else -1
    message, rest = (text[:at], text[at:]) if at > 0 else (text, "")
    message = SANDBOX_PREFIX.sub("", message.strip()).removeprefix("mini_vllm.sandbox.wire.ForeignError: ")
    first, *more = message.splitlines() or [""]
    lines = [f"your code raised {first}", *(f"  | {line}" for line in more)]
    return "\n".join(lines) + (f"\n{rest}" if rest else "")


# How the grading sandbox's own failures (a timeout, a crash, a lab that does not import) print: with their module
# (pytest's way), or with their name alone once plain_failure has taken the module off.
SANDBOX_FAILURES = ("LabDoesNotImport", "CallTimeout", "CallInterrupted", "ChildDied", "TooMuchData", "SandboxFailure")
SANDBOX_PREFIX = re.compile(rf"^(?:mini_vllm\.sandbox\.\w+\.\w+|{'|'.join(SANDBOX_FAILURES)}): ")
SANDBOX_MODULE = re.compile(r"(?m)^mini_vllm\.sandbox\.\w+\.(?=\w+: )")


def plain_failure(details: str) -> str:
    """A failure as a student reads it: no module of the grader's (``mini_vllm.sandbox.remote.``) in front of the
    sandbox's own exceptions (the name stays: ``LabDoesNotImport: lab-05 does not import: ...``)."""
    return SANDBOX_MODULE.sub("", details)
NOT_IMPLEMENTED = re.compile(r"NotImplementedError: (lab-\d\d) task (\d+)")


def failure_hint(details: str, lab: str, task: int) -> list[str]:
    """The most telling line(s) of a failure, for the scorecard: never a table's title.

    - A stub of *another* task in the way: say the test is blocked on it, not failed here.
    - Otherwise the first line of the assertion's message (the course writes the broken
      rule there), and, when the message holds a stream table, the first wrong step.
    """
    if not details:
        return ["failed (see the pytest output)"]
    stub = NOT_IMPLEMENTED.search(details)
    if stub and (stub.group(1), int(stub.group(2))) != (lab, task):
        line = details[stub.start():].splitlines()[0].removeprefix("NotImplementedError: ")
        return [f"blocked until {stub.group(1)} task {stub.group(2)} is done: {line}"]
    lines = [line.strip() for line in details.splitlines() if line.strip()]
    message = SANDBOX_PREFIX.sub("", lines[0].removeprefix("AssertionError: ").removeprefix("Failed: "))
    first_wrong = next((line for line in lines if line.startswith(FIRST_WRONG_STEP)), None)
    if first_wrong is None:
        return [message]
    # "first wrong step: 31 (feed 'x'): ..." reads "step 31 (feed 'x'): ..."; an event table's
    # "first wrong step: event 70 (...)" already names what it points at: "event 70 (...)".
    where = first_wrong.removeprefix(FIRST_WRONG_STEP).strip()
    return [message, f"step {where}" if where[:1].isdigit() else where]


# ------------------------------------------------------------------ across pytest-xdist's workers

def verdict(test: GradedTest) -> list[Any]:
    """What a worker attaches to each of a test's reports: the verdict so far, plain data (execnet carries it)."""
    return [test.passed, test.details]


def collected(tests: dict[str, GradedTest], not_graded: dict[str, dict[str, NotGraded]],
              deselected: dict[str, int], deselected_points: dict[tuple[str, int], int]) -> dict[str, Any]:
    """What a worker collected, before any test ran, as plain data in collection order (no verdict, no weight)."""
    return {
        "tests": [[nodeid, t.lab, t.task, t.task_title, t.name, t.points, t.control, list(t.composes)]
                  for nodeid, t in tests.items()],
        "not_graded": [[lab, name, n.task, n.why, n.cases] for lab, names in not_graded.items()
                       for name, n in names.items()],
        "deselected": [[lab, count] for lab, count in deselected.items()],
        "deselected_points": [[lab, task, points] for (lab, task), points in deselected_points.items()],
    }


@dataclass
class Collected:
    """A worker's collection, read back on the controlling side."""

    tests: dict[str, GradedTest]
    not_graded: dict[str, dict[str, NotGraded]]
    deselected: dict[str, int]
    deselected_points: dict[tuple[str, int], int]


def from_collected(data: dict[str, Any]) -> Collected:
    tests = {nodeid: GradedTest(lab=lab, task=task, task_title=title, name=name, points=points, control=control,
                                composes=tuple(composes))
             for nodeid, lab, task, title, name, points, control, composes in data["tests"]}
    not_graded: dict[str, dict[str, NotGraded]] = {}
    for lab, name, task, why, cases in data["not_graded"]:
        not_graded.setdefault(lab, {})[name] = NotGraded(task, why, cases)
    return Collected(tests, not_graded, {lab: count for lab, count in data["deselected"]},
                     {(lab, task): points for lab, task, points in data["deselected_points"]})
