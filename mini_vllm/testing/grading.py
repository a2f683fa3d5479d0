"""The grading plugin: a scorecard per lab and task, and a Gradescope ``results.json``.

Enabled by the ``--grade results.json`` option (``make grade`` does this). Each graded test
carries ``@pytest.mark.task(n)`` (optionally ``points=k``); the test module's ``TASKS``
dict names the tasks. Tests marked ``control`` prove a bug exists and are not graded. A test
marked ``in_process_only(why)`` counts something only the lab's own process can see: where the
lab runs in the grading sandbox it is not graded (its task's weight goes to the task's other
tests), and the scorecard names it and says why; where the lab runs in the tests' process
(``LAB_SANDBOX=0``) it is graded as usual.

What a lab and a task are worth is the course's policy (``grading.toml``, read by
:mod:`mini_vllm.testing.policy`): a task's weight is shared by its tests in proportion to their
``points``. The results file follows Gradescope's specification (:mod:`mini_vllm.testing.gradescope`).

Under pytest-xdist (``make grade`` grades two labs at once, ``--dist loadfile``: each lab's tests in
one worker, in order) every worker runs this plugin as it would alone, and the controlling process
prints the scorecard and writes the results file from what the workers send it: each test's
verdict on its reports, and what they collected in their ``workeroutput``
(:mod:`mini_vllm.testing.graded`). A test whose worker died before its verdict is a failed test.
"""

from __future__ import annotations

import math
import time
from collections import defaultdict
from collections.abc import Generator
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any, Literal

import pytest

from mini_vllm.labs import RECOMMENDED_ORDER, describe_choice, lab_number, sandboxed
from mini_vllm.testing.graded import (
    GradedTest,
    NotGraded,
    collected,
    failure_hint,
    from_collected,
    plain_failure,
    quoted_if_foreign,
    verdict,
)
from mini_vllm.testing.gradescope import call_costs_here, merge_call_costs, printable, write_results
from mini_vllm.testing.policy import PolicyError, load_policy, test_id

__all__ = ["GradedTest", "Grader", "NotGraded", "failure_hint", "quoted_if_foreign", "student_view"]
# The attribute a worker's test report carries its verdict in (pytest keeps a report's extra attributes
# when it serializes the report for pytest-xdist).
VERDICT = "course_verdict"


@dataclass
class Grader:
    """Scores only the tests that ran: a test that ``-k`` deselected or ``-x`` never reached earns nothing.

    The tests are read when collection is over (``session.items``, after every plugin has
    deselected what it will), so the scorecard can say "3 of 41 graded tests ran" instead
    of counting what never ran as passed.
    """

    results_path: Path
    tests: dict[str, GradedTest] = field(default_factory=dict)
    deselected: dict[str, int] = field(default_factory=lambda: defaultdict(int))  # per lab: left out by -k, -m, …
    # Per (lab, task): the points of the tests left out, so a task's weight is shared by all its tests, not by
    # the ones a -k happened to select.
    deselected_points: dict[tuple[str, int], int] = field(default_factory=lambda: defaultdict(int))
    started: float = field(default_factory=time.monotonic)
    # Per lab, by test name: tests that count inside the lab's process, so are not graded where it runs sandboxed.
    not_graded: dict[str, dict[str, NotGraded]] = field(default_factory=lambda: defaultdict(dict))
    # "alone"; or under pytest-xdist a "worker" (it grades its tests and sends them on; it writes nothing) or the
    # "controller" (it runs no test and writes what its workers sent).
    role: Literal["alone", "worker", "controller"] = "alone"
    # The controller's: the verdicts its workers' reports carried, by node id, and what each worker sent when it
    # finished (its collection, the call costs of its gradings).
    verdicts: dict[str, list[Any]] = field(default_factory=dict)
    workers_finished: list[dict[str, Any]] = field(default_factory=list)

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        # A results file left by an earlier run must never be read as this run's: if this run
        # crashes, there is no result rather than an old one.
        if self.role != "worker":
            self.results_path.unlink(missing_ok=True)

    def pytest_deselected(self, items: list[pytest.Item]) -> None:
        for item in items:
            lab = _lab_of(item)
            if lab is not None and _is_graded(item):
                self.deselected[lab] += 1
                marker = item.get_closest_marker("task")
                assert marker is not None  # _is_graded
                self.deselected_points[lab, int(marker.args[0])] += int(marker.kwargs.get("points", 1))

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        for item in session.items:
            marker = item.get_closest_marker("task")
            lab = _lab_of(item)
            control = item.get_closest_marker("control") is not None
            if lab is None or (marker is None and not control):
                continue
            why = _not_graded_here(item)
            if why is not None and marker is not None:
                self.not_graded[lab].setdefault(item.name.split("[")[0], NotGraded(int(marker.args[0]), why)).cases += 1
                continue
            task = int(marker.args[0]) if marker else 0
            points = int(marker.kwargs.get("points", 1)) if marker and not control else 0
            titles = getattr(getattr(item, "module", None), "TASKS", {})
            composes = item.get_closest_marker("composes")
            self.tests[item.nodeid] = GradedTest(
                lab=lab, task=task, task_title=titles.get(task, ""), name=item.name, points=points, control=control,
                composes=tuple(f"lab-{n}" for n in composes.args) if composes else (),
            )
        self._weigh()

    def _weigh(self) -> None:
        """Give each graded test its share of its task's weight (grading.toml)."""
        raw: dict[str, dict[int, int]] = defaultdict(lambda: defaultdict(int))
        for (lab, task), points in self.deselected_points.items():
            raw[lab][task] += points
        graded = [t for t in self.tests.values() if not t.control]
        for test in graded:
            raw[test.lab][test.task] += test.points
        try:
            weights = {lab: load_policy().task_weights(lab, tasks) for lab, tasks in raw.items()}
        except PolicyError as error:
            raise pytest.UsageError(str(error)) from None
        for test in graded:
            test.weight = weights[test.lab][test.task] * test.points / raw[test.lab][test.task]

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        report = yield
        self._record(item, call, report)
        graded = self.tests.get(item.nodeid)
        if self.role == "worker" and graded is not None:
            setattr(report, VERDICT, verdict(graded))
        return report

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """The controller: a worker's report, with the verdict so far of its test."""
        if self.role != "controller":
            return
        carried = getattr(report, VERDICT, None)
        if carried is not None:
            self.verdicts[report.nodeid] = carried
        elif report.failed:  # a worker died in the test: pytest-xdist's own report, with no verdict on it
            self.verdicts[report.nodeid] = [False, printable(report.longreprtext)]

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        workeroutput = getattr(session.config, "workeroutput", None)
        if self.role == "worker" and workeroutput is not None:
            workeroutput["course-grader"] = {
                "collected": collected(self.tests, self.not_graded, self.deselected, self.deselected_points),
                "call_costs": call_costs_here(),
            }

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        """pytest-xdist: a worker finished (or died; then it sent nothing)."""
        sent = getattr(node, "workeroutput", {}).get("course-grader")
        if sent is not None:
            self.workers_finished.append(sent)

    def _take_the_workers_tests(self) -> None:
        """The controller: the tests as a worker collected them, each with the verdict its reports carried."""
        if not self.workers_finished:
            return
        first = from_collected(self.workers_finished[0]["collected"])  # every worker collects every test
        self.tests, self.not_graded = first.tests, first.not_graded
        self.deselected.update(first.deselected)
        self.deselected_points.update(first.deselected_points)
        for nodeid, test in self.tests.items():
            test.passed, test.details = self.verdicts.get(nodeid, [None, ""])
        self._weigh()

    def forget(self, nodeid: str) -> None:
        """The test runs again (its call ran out of budget): only the new attempt's verdict counts."""
        graded = self.tests.get(nodeid)
        if graded is not None:
            graded.passed, graded.details = None, ""

    def _record(self, item: pytest.Item, call: pytest.CallInfo[None], report: pytest.TestReport) -> None:
        graded = self.tests.get(item.nodeid)
        if graded is None or graded.passed is False:
            return
        if report.skipped and not graded.control:  # a graded test that did not run earns nothing
            graded.passed = False
            graded.details = f"skipped, so not graded: {_skip_reason(report)}"
            return
        if not report.failed:
            if report.when == "call" and report.passed:
                graded.passed = True
            return
        graded.passed = False
        if call.excinfo is not None:
            # exconly() is the exception with its whole message (for an assert, pytest's
            # explanation and our step-by-step table) but without the traceback.
            graded.details = quoted_if_foreign(call.excinfo.value, call.excinfo.exconly().strip())
        else:
            graded.details = report.longreprtext
        graded.details = printable(plain_failure(graded.details))

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if self.role == "worker":
            return
        if self.role == "controller":
            self._take_the_workers_tests()
        graded = [t for t in self.tests.values() if not t.control]
        ran = [t for t in graded if t.passed is not None]
        summary = self.summary(graded, ran)
        lines = self.scorecard(graded, summary)
        for line in lines:
            terminalreporter.write_line(line)
        for test in graded:  # points never shrink: a selected test that never ran is a failed result
            if test.passed is None:
                test.passed, test.details = False, "did not run, so not graded"
        student, full = self.student_scorecard(graded, summary)
        costs = merge_call_costs([sent["call_costs"] for sent in self.workers_finished]) \
            if self.role == "controller" else call_costs_here()
        write_results(self.results_path, graded, scorecard=student, partial=summary,
                      execution_time=time.monotonic() - self.started, full_scorecard=full, call_costs=costs)
        terminalreporter.write_line(f"results written to {self.results_path}")

    def scorecard(self, graded: list[GradedTest], summary: str) -> list[str]:
        """The scorecard's lines: each lab, each task with its first failure, the total."""
        by_lab: dict[str, list[GradedTest]] = defaultdict(list)
        for test in graded:
            by_lab[test.lab].append(test)
        order = {number: rank for rank, number in enumerate(RECOMMENDED_ORDER)}
        total, earned = _points(graded)  # the maximum is what was selected, run or not: points never shrink
        width = max([len(t.task_title) + 10 for t in graded] + [len(lab) for lab in by_lab] + [40])
        lines = ["", f"Scorecard — {describe_choice()}"]
        for lab in sorted(by_lab, key=lambda name: order.get(lab_number(name), 99)):
            tests = by_lab[lab]
            lab_max, lab_got = _points(tests)
            lines += ["", f"{lab:<{width}} {_fmt(lab_got):>5} / {_fmt(lab_max):<5}"
                          f"{_partial(tests, self.deselected.get(lab, 0))}"]
            for task in sorted({t.task for t in tests}):
                in_task = [t for t in tests if t.task == task]
                task_max, task_got = _points(in_task)
                lines.append(f"  task {task}  {in_task[0].task_title:<{width - 10}} {_fmt(task_got):>5} / "
                             f"{_fmt(task_max):<5}{_partial(in_task)}")
                failed = [t for t in in_task if t.passed is False]
                if failed:
                    lines.append(f"           first failure: {failed[0].name}")
                    for label, line in zip(("hint", "at"), failed[0].hint, strict=False):
                        lines.append(f"           {label}: {_shorten(line)}")
            for name, left_out in self.not_graded.get(lab, {}).items():
                cases = f" ({left_out.cases} cases)" if left_out.cases != 1 else ""
                lines.append(f"  not graded in the grading sandbox (worth 0 here): task {left_out.task} {name}{cases}")
                lines.append(f"           why: {left_out.why}")  # the course's words, not the student's
        lines.append("")
        if summary:
            lines.append(summary)
        lines.append(f"{'TOTAL':<{width}} {_fmt(earned):>5} / {_fmt(total):<5}")
        return lines

    def student_scorecard(self, graded: list[GradedTest], summary: str) -> tuple[str, str | None]:
        """(the scorecard results.json shows the student, the scorecard of every test or None if that is the same).

        What the student reads is built from the tests they may see now (grading.toml's visibility); the
        scorecard of every test goes into the results file under the hidden tests' own visibility.
        """
        full = "\n".join(self.scorecard(graded, summary)).strip("\n")
        shown, note = student_view(graded)
        if note is None:
            return full, None
        return "\n".join([*self.scorecard(shown, summary), note]).strip("\n"), full

    def summary(self, graded: list[GradedTest], ran: list[GradedTest]) -> str:
        """One sentence when the run was not the whole grade: what was selected and what ran."""
        selected, deselected = len(graded), sum(self.deselected.values())
        if selected == 0:
            return (f"No graded test was selected ({deselected} deselected): nothing was graded, "
                    "so this run earns no points.")
        if deselected == 0 and len(ran) == selected:
            return ""
        of = selected + deselected
        ran_part = f", {len(ran)} ran" if len(ran) != selected else ""
        return (f"Partial run: {selected} of {of} graded tests selected{ran_part}. "
                "Points count only what ran: this is not the grade.")


# When tests a visibility rule hides show up, in the student's words (Gradescope's visibility names).
SHOWN_WHEN = {"after_due_date": "shown after the due date", "after_published": "shown when grades are published",
              "hidden": "never shown (your instructor sees them)"}


def student_view(graded: list[GradedTest]) -> tuple[list[GradedTest], str | None]:
    """The tests a student may see in their result now, and a line saying what is hidden and until when.

    ``None`` for the line when nothing is hidden. A hidden test must leave no trace in what the student
    reads: not its name, not its hint, not the points of the task or lab it belongs to.
    """
    policy = load_policy()
    shown: list[GradedTest] = []
    hidden: dict[str, int] = defaultdict(int)
    for test in graded:
        visibility = policy.visibility_of(test_id(test.lab, test.task, test.name))
        if visibility == "visible":
            shown.append(test)
        else:
            hidden[visibility] += 1
    if not hidden:
        return graded, None
    when = "; ".join(f"{count} {SHOWN_WHEN[visibility]}" for visibility, count in sorted(hidden.items()))
    return shown, (f"Some tests are hidden for now ({sum(hidden.values())} of {len(graded)}: {when}). "
                   "This scorecard counts only the tests shown; your grade counts them all.")


def _skip_reason(report: pytest.TestReport) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr)


def _is_graded(item: pytest.Item) -> bool:
    return (item.get_closest_marker("task") is not None and item.get_closest_marker("control") is None
            and _not_graded_here(item) is None)


def _not_graded_here(item: pytest.Item) -> str | None:
    """Why ``item`` is not graded in this run: it counts inside the lab's process, and the lab runs sandboxed."""
    marker = item.get_closest_marker("in_process_only")
    lab = _lab_of(item)
    if marker is None or lab is None or not sandboxed(lab):
        return None
    return str(marker.args[0]) if marker.args else "it counts inside the lab's own process"


def _lab_of(item: pytest.Item) -> str | None:
    return next((p.name for p in item.path.parents if p.name.startswith("lab-")), None)


def _partial(tests: list[GradedTest], deselected: int = 0) -> str:
    """After a lab's or task's points: how much of it this run selected and ran, when not all of it."""
    graded = [t for t in tests if not t.control]
    ran = sum(1 for t in graded if t.passed is not None)
    notes = [f"{len(graded)} of {len(graded) + deselected} graded tests selected"] if deselected else []
    if ran != len(graded):
        notes.append(f"{ran} ran")
    return f"  ({', '.join(notes)})" if notes else ""


def _points(tests: list[GradedTest]) -> tuple[Fraction, Fraction]:
    """(what the tests are worth, what they earned), exact."""
    return sum((t.weight for t in tests), Fraction(0)), sum((t.weight for t in tests if t.passed), Fraction(0))


def _fmt(points: Fraction) -> str:
    """Points for the scorecard: whole numbers as such, else two decimals rounded down (never more than earned)."""
    if points.denominator == 1:
        return str(points.numerator)
    return f"{math.floor(points * 100) / 100:.2f}".rstrip("0").rstrip(".")


def _shorten(text: str, limit: int = 150) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
