"""``make grade`` grades two labs at once (pytest-xdist): the same grade as one lab at a time.

The workers run the grading plugin as it runs alone; the controlling process prints the scorecard
and writes ``results.json`` from each test's verdict (carried on its reports) and from what the
workers collected (sent when they finish). Here: the controlling side's bookkeeping on made-up
reports (a worker that dies mid-test costs that test, and a test no report reached is not
passed), and one submission with two wrong variants graded both ways, test by test.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from mini_vllm.labs import LABS_DIR, REPO_ROOT
from mini_vllm.testing import graded as graded_module
from mini_vllm.testing.gradescope import merge_call_costs
from mini_vllm.testing.grading import VERDICT, Grader
from mini_vllm.testing.policy import load_policy

LAB_03 = next(LABS_DIR.glob("lab-03-*")).name


def _collected() -> dict[str, Any]:
    tests = {
        f"{LAB_03}/test_lab.py::test_a": graded_module.GradedTest(LAB_03, 1, "the table", "test_a", 1),
        f"{LAB_03}/test_lab.py::test_b": graded_module.GradedTest(LAB_03, 2, "feed", "test_b", 2),
        f"{LAB_03}/test_lab.py::test_c": graded_module.GradedTest(LAB_03, 3, "flush", "test_c", 1),
        f"{LAB_03}/test_lab.py::test_d": graded_module.GradedTest(LAB_03, 3, "flush", "test_d", 1),
    }
    not_graded = {LAB_03: {"test_e": graded_module.NotGraded(3, "it counts inside the lab's process", 4)}}
    return graded_module.collected(tests, not_graded, {LAB_03: 1}, {(LAB_03, 2): 3})


def _report(nodeid: str, outcome: str, verdict: list[Any] | None, longrepr: str = "") -> Any:
    report = SimpleNamespace(nodeid=nodeid, failed=outcome == "failed", longreprtext=longrepr)
    if verdict is not None:
        setattr(report, VERDICT, verdict)
    return report


def test_the_controller_grades_from_the_workers_reports(tmp_path: Path) -> None:
    grader = Grader(tmp_path / "results.json", role="controller")
    a, b, c, d = (f"{LAB_03}/test_lab.py::{name}" for name in ("test_a", "test_b", "test_c", "test_d"))
    grader.pytest_runtest_logreport(_report(a, "passed", [None, ""]))  # setup
    grader.pytest_runtest_logreport(_report(a, "passed", [True, ""]))  # call
    grader.pytest_runtest_logreport(_report(b, "failed", [False, "AssertionError: the rule"]))
    grader.pytest_runtest_logreport(_report(c, "passed", [None, ""]))  # its setup; then the worker died
    grader.pytest_runtest_logreport(_report(c, "failed", None, "worker 'gw1' crashed while running 'test_c'"))
    # test_d: no report ever came (its worker died before it)
    grader.pytest_testnodedown(SimpleNamespace(workeroutput={"course-grader": {
        "collected": json.loads(json.dumps(_collected())), "call_costs": None}}), None)
    grader._take_the_workers_tests()
    verdicts = {name.split("::")[1]: (t.passed, t.details) for name, t in grader.tests.items()}
    assert verdicts == {"test_a": (True, ""), "test_b": (False, "AssertionError: the rule"),
                        "test_c": (False, "worker 'gw1' crashed while running 'test_c'"), "test_d": (None, "")}, (
        "each test's verdict is the last its reports carried; a worker's crash fails the test it was running; "
        "a test no report reached has no verdict (the summary then fails it: 'did not run')")
    assert list(grader.tests) == [a, b, c, d], "the tests keep the order the worker collected them in"
    assert grader.not_graded[LAB_03]["test_e"].cases == 4 and grader.deselected[LAB_03] == 1
    # test_b's task shares its weight with the 3 points a -k left out, as it does alone: 2 of its 5 points.
    task_weights = load_policy().task_weights(LAB_03, {1: 1, 2: 5, 3: 2})
    assert grader.tests[b].weight == task_weights[2] * 2 / 5 and grader.tests[a].weight == task_weights[1]


def test_a_worker_writes_nothing_and_sends_its_collection(tmp_path: Path) -> None:
    results = tmp_path / "results.json"
    results.write_text("{}", encoding="utf-8")
    grader = Grader(results, role="worker")
    grader.pytest_sessionstart(SimpleNamespace())
    assert results.exists(), "a worker must not delete the results file: the controlling process owns it"
    data = _collected()
    back = graded_module.from_collected(json.loads(json.dumps(data)))
    assert graded_module.collected(back.tests, back.not_graded, back.deselected, back.deselected_points) == data


def test_call_costs_of_two_workers_merge_as_one_process_would() -> None:
    one = {"lab-03": {"calls": 5, "slowest_call": None, "slowest_cpu_s": 0.0, "budget_cpu_s": 1.0,
                      "largest_message_bytes": 10, "most_bytes_in_a_test": 100, "most_served_cpu_s_in_a_test": 0.5,
                      "cpu_measured": True}}
    two = {"lab-03": {"calls": 7, "slowest_call": "feed", "slowest_cpu_s": 0.25, "budget_cpu_s": 1.0,
                      "largest_message_bytes": 4, "most_bytes_in_a_test": 300, "most_served_cpu_s_in_a_test": 0.25,
                      "cpu_measured": True},
           "lab-04": {"calls": 1, "slowest_call": "push", "slowest_cpu_s": 0.5, "budget_cpu_s": 3.0,
                      "largest_message_bytes": 1, "most_bytes_in_a_test": 1, "most_served_cpu_s_in_a_test": 0.0,
                      "cpu_measured": True}}
    merged = merge_call_costs([one, None, two])
    assert merged is not None
    assert merged["lab-03"] == {"calls": 12, "slowest_call": "feed", "slowest_cpu_s": 0.25, "budget_cpu_s": 1.0,
                                "largest_message_bytes": 10, "most_bytes_in_a_test": 300,
                                "most_served_cpu_s_in_a_test": 0.5, "cpu_measured": True}
    assert merged["lab-04"] == two["lab-04"] and merge_call_costs([None, None]) is None


# One submission with two wrong variants (as tests/test_budgets_under_load.py grades it), on a selection of tests
# that fails in both labs, passes in the others, and crosses the sandbox in each.
VARIANTS = REPO_ROOT / "instructor" / "wrong_variants"
TWO_WRONG = {"LAB_IMPL_04": str(VARIANTS / "lab_04" / "prompt_re_emitted.py"),
             "LAB_IMPL_08": str(VARIANTS / "lab_08" / "char_boundary_only.py"),
             "LAB_SANDBOX_TRUSTED": "1"}  # the variants import the reference they change
SELECTED = ("(fifty_random_slicings and not tekken and not mistral and not hf) or tekken_byte_tokens or "
            "(lifecycle_holds_for_every_reply and weather) or (prompt_ending_mid_character and not hf)")


def _grade(results: Path, parallel: list[str]) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "LAB_"))}
    env.update({"LAB_SANDBOX": "1", "LAB_IMPL": "solution", "HYPOTHESIS_PROFILE": "ci", **TWO_WRONG})
    labs = [str(next(LABS_DIR.glob(f"lab-{n}-*"))) for n in ("03", "04", "05", "08")]
    done = subprocess.run([sys.executable, "-m", "pytest", *labs, "-q", "-p", "no:cacheprovider", *parallel,
                           "-m", "not control", "--tb=no", "-k", SELECTED, "--grade", str(results)],
                          cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert results.exists(), f"no results.json:\n{(done.stdout + done.stderr)[-4000:]}"
    return json.loads(results.read_text(encoding="utf-8"))


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_two_workers_grade_exactly_as_one_process(tmp_path: Path) -> None:
    alone = _grade(tmp_path / "alone.json", ["-p", "no:xdist"])
    two = _grade(tmp_path / "two.json", ["-n", "2", "--dist", "loadfile"])
    per_test = [{t["name"]: (t["status"], t["score"], t["max_score"], t["output"].splitlines()[:1])
                 for t in run["tests"]} for run in (alone, two)]
    lost = [name for name, (status, *_) in per_test[0].items() if status != "passed"]
    assert any("lab-04" in n for n in lost) and any("lab-08" in n for n in lost), (
        f"the wrong variants must fail some selected tests, or this compares nothing: {lost}")
    assert any(name.startswith(("lab-03", "lab-05")) for name in per_test[0]), "the reference labs are graded too"
    differ = [f"{name}\n    alone: {per_test[0].get(name)}\n    two:   {per_test[1].get(name)}"
              for name in sorted(per_test[0].keys() | per_test[1].keys())
              if per_test[0].get(name) != per_test[1].get(name)]
    assert not differ, "two workers graded a test differently from one process:\n" + "\n".join(differ)
    assert [t["name"] for t in alone["tests"]] == [t["name"] for t in two["tests"]], "the same tests, in the same order"
    assert (alone["score"], alone["output"]) == (two["score"], two["output"]), "the same score and scorecard"
    calls = [{lab: cost["calls"] for lab, cost in run["extra_data"]["call_costs"].items()} for run in (alone, two)]
    assert calls[0] == calls[1], f"every call the gradings made is counted once: alone {calls[0]}, two {calls[1]}"
