"""The grading plugin: a scorecard per lab and task, and a Gradescope ``results.json``.

Enabled by the ``--grade results.json`` option (``make grade`` does this). Each graded test
carries ``@pytest.mark.task(n)`` (optionally ``points=k``); the test module's ``TASKS``
dict names the tasks. Tests marked ``control`` prove a bug exists and are not graded.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Generator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from mini_vllm.labs import RECOMMENDED_ORDER, describe_choice, lab_number
from mini_vllm.testing.trace import FIRST_WRONG_STEP


@dataclass
class GradedTest:
    lab: str  # the lab folder name
    task: int
    task_title: str
    name: str
    points: int
    passed: bool = True
    control: bool = False  # proves a bug is real; reported with max_score 0, never graded
    composes: tuple[str, ...] = ()  # other labs this test runs (their code can fail first)
    details: str = ""  # the whole exception message, for results.json ("" when passed)

    @property
    def hint(self) -> list[str]:
        return failure_hint(self.details, f"lab-{lab_number(self.lab)}", self.task)


@dataclass
class Grader:
    results_path: Path
    tests: dict[str, GradedTest] = field(default_factory=dict)

    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        for item in items:
            marker = item.get_closest_marker("task")
            lab = next((p.name for p in item.path.parents if p.name.startswith("lab-")), None)
            control = item.get_closest_marker("control") is not None
            if lab is None or (marker is None and not control):
                continue
            task = int(marker.args[0]) if marker else 0
            points = int(marker.kwargs.get("points", 1)) if marker and not control else 0
            titles = getattr(getattr(item, "module", None), "TASKS", {})
            composes = item.get_closest_marker("composes")
            self.tests[item.nodeid] = GradedTest(
                lab=lab, task=task, task_title=titles.get(task, ""), name=item.name, points=points, control=control,
                composes=tuple(f"lab-{n}" for n in composes.args) if composes else (),
            )

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
        report = yield
        self._record(item, call, report)
        return report

    def _record(self, item: pytest.Item, call: pytest.CallInfo[None], report: pytest.TestReport) -> None:
        graded = self.tests.get(item.nodeid)
        if graded is None or not report.failed or not graded.passed:
            return
        graded.passed = False
        if call.excinfo is not None:
            # exconly() is the exception with its whole message (for an assert, pytest's
            # explanation and our step-by-step table) but without the traceback.
            graded.details = call.excinfo.exconly().strip()
        else:
            graded.details = report.longreprtext

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        write = terminalreporter.write_line
        by_lab: dict[str, list[GradedTest]] = defaultdict(list)
        for test in self.tests.values():
            if not test.control:
                by_lab[test.lab].append(test)
        order = {number: rank for rank, number in enumerate(RECOMMENDED_ORDER)}
        total = earned = 0
        width = max([len(t.task_title) + 10 for t in self.tests.values()] + [len(lab) for lab in by_lab] + [40])
        write("")
        write(f"Scorecard — {describe_choice()}")
        for lab in sorted(by_lab, key=lambda name: order.get(lab_number(name), 99)):
            tests = by_lab[lab]
            lab_max, lab_got = _points(tests)
            total, earned = total + lab_max, earned + lab_got
            write("")
            write(f"{lab:<{width}} {lab_got:>3} / {lab_max:<3}")
            for task in sorted({t.task for t in tests}):
                in_task = [t for t in tests if t.task == task]
                task_max, task_got = _points(in_task)
                write(f"  task {task}  {in_task[0].task_title:<{width - 10}} {task_got:>3} / {task_max:<3}")
                failed = [t for t in in_task if not t.passed]
                if failed:
                    write(f"           first failure: {failed[0].name}")
                    for label, line in zip(("hint", "at"), failed[0].hint, strict=False):
                        write(f"           {label}: {_shorten(line)}")
        write("")
        write(f"{'TOTAL':<{width}} {earned:>3} / {total:<3}")
        self._write_results(earned, total)
        write(f"results written to {self.results_path}")

    def _write_results(self, earned: int, total: int) -> None:
        tests = [
            {
                "name": f"{t.lab} › task {t.task} › {t.name}",
                "score": t.points if t.passed else 0,
                "max_score": t.points,
                "output": "" if t.passed else t.details,
                "visibility": "visible",
                "tags": [f"composes {lab}" for lab in t.composes],
            }
            for t in self.tests.values() if not t.control  # controls are not graded: not in the results
        ]
        results = {"score": earned, "max_score": total, "output": describe_choice(), "tests": tests}
        self.results_path.parent.mkdir(parents=True, exist_ok=True)
        self.results_path.write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


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
    message = lines[0].removeprefix("AssertionError: ").removeprefix("Failed: ")
    first_wrong = next((line for line in lines if line.startswith(FIRST_WRONG_STEP)), None)
    return [message] + ([first_wrong.replace(FIRST_WRONG_STEP, "step", 1)] if first_wrong else [])


def _points(tests: list[GradedTest]) -> tuple[int, int]:
    return sum(t.points for t in tests), sum(t.points for t in tests if t.passed)


def _shorten(text: str, limit: int = 150) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
