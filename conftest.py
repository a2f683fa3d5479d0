"""Course-wide pytest setup: which implementation is under test, hypothesis profiles, grading.

- The header names the implementation under test (``LAB_IMPL``), so nobody grades
  the solution by accident.
- Hypothesis runs the derandomized ``ci`` profile unless ``HYPOTHESIS_PROFILE=dev``:
  the same examples every run, no deadline, so a grade never depends on luck or load.
- ``--grade results.json`` turns on the scorecard and the Gradescope results file.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from mini_vllm.labs import describe_choice
from mini_vllm.testing.grading import Grader

settings.register_profile(
    "ci",
    derandomize=True,
    deadline=None,
    database=None,
    max_examples=100,
    print_blob=True,
    report_multiple_bugs=False,  # one minimal failing example: what a student can act on
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile("dev", deadline=None, max_examples=500)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--grade", metavar="RESULTS_JSON", default=None,
                     help="print a scorecard per lab and task and write Gradescope results to RESULTS_JSON")


def pytest_configure(config: pytest.Config) -> None:
    results = config.getoption("--grade")
    if results:
        config.pluginmanager.register(Grader(Path(results).resolve()), "course-grader")


def pytest_report_header(config: pytest.Config) -> str:
    return describe_choice()
