"""Course-wide pytest setup: which implementation is under test, hypothesis profiles, grading.

- The header and the very last line of every run name the code under test (``LAB_IMPL``),
  even with ``-q``, so nobody grades the reference by accident.
- Hypothesis runs the derandomized ``ci`` profile unless ``HYPOTHESIS_PROFILE`` says
  otherwise: the same examples every run, no deadline, so a grade never depends on luck
  or load, and no reproduction blob or "explanation" noise under the failure.
- ``--grade results.json`` turns on the scorecard and the Gradescope results file.
- Same code, same grade (mini_vllm/reproducible.py): the installed packages must be the ones
  ``requirements/lock.txt`` names (a graded run stops otherwise, any other run warns), and
  hypothesis never mines literals from whatever modules the command happened to import.
"""

from __future__ import annotations

import gc
import os
import re
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, settings

from mini_vllm.labs import all_lab_numbers, describe_choice, graded_footer, lab_of_path
from mini_vllm.reproducible import UNLOCKED_EXIT, check_installed, freeze_hypothesis_constants
from mini_vllm.sandbox import budget
from mini_vllm.sandbox.affinity import grading_slot, keep_to_one_cpu
from mini_vllm.testing.grading import Grader
from mini_vllm.testing.policy import load_policy
from mini_vllm.testing.retry import RetryOnTimeout

# jsonschema (imported by mistral-common, nbformat and schemathesis) loads rfc3987_syntax when it
# is installed (Jupyter's server installs it), only to check the "iri" string format, and that
# module compiles a Lark grammar on import: 0.8 s in every test process and grading child. No
# schema here uses "iri", so the test processes do without it.
sys.modules.setdefault("rfc3987_syntax", None)  # type: ignore[arg-type]
# Code that is not the reference runs in the grading sandbox (mini_vllm/sandbox): its own process,
# walled off, talking to the tests through proxies. `make grade` and `make lab-03` (any lab) set LAB_SANDBOX=1,
# which sandboxes the reference too; here the default sandboxes everything but the reference.
os.environ.setdefault("LAB_SANDBOX", "auto")
# A graded run's own memory is capped where the OS allows it (what the child sends is bounded
# too: mini_vllm/sandbox/policy.py), so a runaway fails a test with MemoryError, never the machine.
if os.environ["LAB_SANDBOX"] == "1":
    budget.cap_own_memory()
# The sandbox's budgets per call, in CPU seconds: each lab's from grading.toml (LAB_CALL_BUDGET_S overrides them all).
budget.configure({n: load_policy().budget_of(n) for n in all_lab_numbers()}, load_policy().call_budget_s)

_QUIET_FAILURES = {
    "derandomize": True,
    "deadline": None,
    "database": None,
    "print_blob": False,
    "report_multiple_bugs": False,  # one minimal failing example: what a student can act on
    "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large],
}
# What students and CI get: fixed examples, shrunk to the smallest failure, no explain phase.
settings.register_profile("ci", max_examples=100,
                          phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink], **_QUIET_FAILURES)
# The course's own checks on the wrong variants: the same examples (so the same verdicts),
# without shrinking, which only makes a failure readable and nobody reads these.
settings.register_profile("contract", max_examples=100,
                          phases=[Phase.explicit, Phase.reuse, Phase.generate], **_QUIET_FAILURES)
# Bug hunting: fresh random examples every run, five times as many.
settings.register_profile("dev", deadline=None, max_examples=500)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
# Examples that depend on the test alone: not on which labs, solutions or student files the
# command imported before it (hypothesis would otherwise draw literals from their source).
freeze_hypothesis_constants()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--grade", metavar="RESULTS_JSON", default=None,
                     help="print a scorecard per lab and task and write Gradescope results to RESULTS_JSON")
    parser.addoption("--task", metavar="N", type=int, default=None,
                     help="run only the graded tests of task N (make lab-07 TASK=1)")


# `-m "task(1)"` looks like it should pick task 1, but pytest's -m matches marker names (and keyword
# arguments), never a positional argument: it would stop with a parse error that names no fix.
TASK_IN_MARKEXPR = re.compile(r"\btask\s*\(")


def pytest_configure(config: pytest.Config) -> None:
    if TASK_IN_MARKEXPR.search(config.getoption("markexpr", "") or ""):
        raise pytest.UsageError(
            "-m cannot pick a task (pytest's -m matches marker names, not their arguments). To grade one task, "
            "use TASK: `make lab-07 TASK=1` (or the pytest option --task 1).")
    results = config.getoption("--grade")
    if not hasattr(config, "workerinput"):  # pytest-xdist's workers share their controller's .venv
        _check_installed_packages(config, graded=bool(results))
    if results:
        if hasattr(config, "workerinput"):
            role = "worker"
        elif config.getoption("dist", "no") != "no" and config.getoption("tx", None):
            role = "controller"  # pytest-xdist's (its own test for distributing): its workers run the tests
        else:
            role = "alone"
        grader = Grader(Path(results).resolve(), role=role)
        config.pluginmanager.register(grader, "course-grader")
    if os.environ.get("LAB_SANDBOX", "0") != "0":  # a test whose call ran out runs once more in a fresh child
        config.pluginmanager.register(RetryOnTimeout(), "course-retry-on-timeout")
    slot = grading_slot(os.environ, getattr(config, "workerinput", None))
    if slot is not None:  # make grade's worker and its grading children take turns on one CPU of their own
        keep_to_one_cpu(*slot)
    if not hasattr(config, "workerinput"):  # under pytest-xdist, only the controlling process prints
        config.pluginmanager.register(GradedFooter(config), "course-graded-footer")


def _check_installed_packages(config: pytest.Config, graded: bool) -> None:
    """A grade must come from the locked versions: stop a graded run on any other, warn otherwise."""
    check = check_installed()
    if check.ok:
        return
    if graded:  # its own exit status, so make's last line names the fix rather than a failing grade
        pytest.exit(check.message(graded=True), returncode=UNLOCKED_EXIT)
    config.pluginmanager.register(InstallWarning(check.message(graded=False)), "course-install-warning")


class InstallWarning:
    """Says that the packages are not the locked ones at the top of the run and again under its summary."""

    def __init__(self, message: str) -> None:
        self.message = message

    def pytest_report_header(self) -> str:
        return self.message

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        terminalreporter.write_line(self.message, yellow=True)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """``--task N``: keep task N's graded tests (and the controls, which are never graded); the rest are
    deselected, so the scorecard says how much of the lab this run selected."""
    task = config.getoption("--task")
    if task is None:
        return
    keep, drop = [], []
    for item in items:
        marker = item.get_closest_marker("task")
        wanted = marker is None or (marker.args and marker.args[0] == task)
        (keep if wanted else drop).append(item)
    if drop:
        items[:] = keep
        config.hook.pytest_deselected(items=drop)


def pytest_collection_finish(session: pytest.Session) -> None:
    # What collection loaded stays for the whole run (vocabularies of 131,072 tokens, every test module):
    # frozen, so the collector's full passes, and pytest's own at the session's end, stop walking it again.
    gc.freeze()


def pytest_report_header(config: pytest.Config) -> str:
    return describe_choice()


class GradedFooter:
    """After pytest's own summary line, whose code the run graded (when it ran any lab).

    It reads test reports rather than collected items, because under pytest-xdist only
    reports reach the process that prints.
    """

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.labs: set[str] = set()

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self._note(report.nodeid)

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        self._note(report.nodeid)

    def _note(self, nodeid: str) -> None:
        lab = lab_of_path(nodeid)
        if lab is not None:
            self.labs.add(lab)

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        if self.labs and reporter is not None:
            reporter.write_line(graded_footer(sorted(self.labs)))
