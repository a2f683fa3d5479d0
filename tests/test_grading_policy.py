"""grading.toml and results.json: the policy is read as written, and every result follows Gradescope's format.

- the policy file parses, names every task of the labs it weighs, and refuses what it cannot grade by
  (an unknown key, weights that do not add up, a visibility Gradescope does not know);
- a task's weight is shared by its tests, so a lab is worth its points whatever its test count;
- results.json validates against the JSON Schema written from Gradescope's specification (and that
  schema refuses what the specification does not allow), and says what produced the grade.
"""

from __future__ import annotations

import ast
import copy
import hashlib
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from mini_vllm.labs import LABS_DIR, REPO_ROOT, lab_number
from mini_vllm.testing.gradescope import results_document, validate
from mini_vllm.testing.policy import PolicyError, load_policy, parse_policy
from mini_vllm.testing.provenance import course_version, git_commit

LAB_DIRS = sorted(p for p in LABS_DIR.iterdir() if p.is_dir() and p.name.startswith("lab-"))


def tasks_of(lab_dir: Path) -> set[int]:
    """The task numbers in a lab's ``TASKS`` dict, read without importing the tests (that would load the lab)."""
    tree = ast.parse((lab_dir / "test_lab.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "TASKS" for t in node.targets):
            return set(ast.literal_eval(node.value))
    raise AssertionError(f"{lab_dir.name}/test_lab.py has no TASKS dict")


def test_the_policy_file_parses_and_stamps_a_tests_version() -> None:
    policy = load_policy()
    assert policy.tests_version, "grading.toml must give tests_version: it is stamped into every result"
    assert policy.call_budget_s > 0


@pytest.mark.parametrize("lab_dir", LAB_DIRS, ids=lambda d: d.name)
def test_every_task_of_a_weighed_lab_has_a_weight(lab_dir: Path) -> None:
    weighed = load_policy().lab(lab_dir.name)
    if not weighed.tasks:
        pytest.skip(f"{lab_dir.name} has no task weights in grading.toml: its tasks share its points by test points")
    assert set(weighed.tasks) == tasks_of(lab_dir), (
        f"grading.toml weighs {lab_dir.name}'s tasks {sorted(weighed.tasks)}; its TASKS: {sorted(tasks_of(lab_dir))}")
    assert sum(weighed.tasks.values()) == weighed.points


def minimal(**extra: Any) -> dict[str, Any]:
    return {"tests_version": "t1", **extra}


@pytest.mark.parametrize(("raw", "names"), [
    (minimal(lab_point=100), "lab_point"),  # a typo of lab_points must not silently grade with the default
    (minimal(labs={"lab-03": {"tasks": {"1": 50, "2": 40}}}), "add up to 90"),
    (minimal(labs={"lab-3": {}}), "lab-NN"),
    (minimal(labs={"lab-03": {"weight": 5}}), "weight"),
    (minimal(visibility="public"), "visibility"),
    (minimal(visibility_rules=[{"tests": "lab-03 *", "visibility": "later"}]), "visibility_rules[0]"),
    (minimal(call_budget_s=0), "call_budget_s"),
    ({}, "tests_version"),
])
def test_a_policy_the_course_cannot_grade_by_is_refused_by_name(raw: dict[str, Any], names: str) -> None:
    with pytest.raises(PolicyError, match=names.replace("[", r"\[").replace("]", r"\]")):
        parse_policy(raw)


def test_tasks_without_weights_share_the_lab_by_their_tests_points() -> None:
    policy = parse_policy(minimal(lab_points=60))
    assert policy.task_weights("lab-09", {1: 1, 2: 2}) == {1: 20, 2: 40}


def test_weights_that_miss_a_task_the_tests_grade_are_refused() -> None:
    policy = parse_policy(minimal(labs={"lab-03": {"tasks": {"1": 50, "2": 50}}}))
    with pytest.raises(PolicyError, match=r"grade tasks \[1, 2, 3\]"):
        policy.task_weights("lab-03", {1: 8, 2: 42, 3: 3})


def test_visibility_rules_match_test_ids_and_the_last_match_wins() -> None:
    policy = parse_policy(minimal(visibility_rules=[
        {"tests": "lab-04 task 2 *", "visibility": "after_due_date"},
        {"tests": "lab-04 task 2 test_cost[bpe]", "visibility": "hidden"},  # brackets are literal, not a class
    ]))
    assert policy.visibility_of("lab-04 task 2 test_cost[bpe]") == "hidden"
    assert policy.visibility_of("lab-04 task 2 test_cost[b]") == "after_due_date"
    assert policy.visibility_of("lab-04 task 1 test_cost[bpe]") == "visible"


# ------------------------------------------------------------------------------ results.json


@dataclass
class FakeTest:
    lab: str
    task: int
    name: str
    passed: bool | None
    weight: Fraction
    task_title: str = "a task"
    composes: tuple[str, ...] = ()
    details: str = ""


def fake_results() -> dict[str, Any]:
    tests = [FakeTest("lab-03-streaming-detokenizer", 2, f"test_{i}", i != 1, Fraction(70, 3)) for i in range(3)]
    tests[1].details = "AssertionError: feed emitted a broken character"
    return results_document(tests, scorecard="Scorecard\nTOTAL  46.66 / 70", execution_time=1.234)


def test_a_results_document_follows_gradescopes_format() -> None:
    results = fake_results()
    validate(results)
    assert [t["status"] for t in results["tests"]] == ["passed", "failed", "passed"]
    assert results["score"] == pytest.approx(140 / 3) and results["extra_data"]["max_score"] == 70
    assert results["tests"][1]["output"].startswith("AssertionError: feed"), "a failure says why in its output"
    assert results["output"].startswith("Scorecard") and results["output_format"] == "text"
    assert [t["number"] for t in results["tests"]] == ["3.2.1", "3.2.2", "3.2.3"]


@pytest.mark.parametrize("corrupt", [
    lambda r: r.pop("score"),
    lambda r: r.update(visibility="public"),
    lambda r: r["tests"][0].update(status="ok"),
    lambda r: r["tests"][0].update(score="23.3"),
    lambda r: r.update(max_score=70),  # not a key of the specification: Gradescope would ignore it
    lambda r: r.update(output_format="markdown"),
], ids=["no score", "visibility", "status", "score as text", "unknown key", "format"])
def test_the_schema_refuses_what_gradescope_does_not_specify(corrupt: Any) -> None:
    results = copy.deepcopy(fake_results())
    corrupt(results)
    with pytest.raises(jsonschema.ValidationError):
        validate(results)


def test_a_result_says_what_produced_it() -> None:
    extra = fake_results()["extra_data"]
    assert extra["course_version"] == course_version() != "unknown"
    assert extra["tests_version"] == load_policy().tests_version
    assert extra["commit"] == (git_commit() or extra["commit"]), "in the instructor's checkout, the git commit"
    tests_file = LABS_DIR / "lab-03-streaming-detokenizer" / "test_lab.py"
    assert extra["files"]["tests"]["lab-03"]["sha256"] == hashlib.sha256(tests_file.read_bytes()).hexdigest()
    assert extra["files"]["graded"]["lab-03"]["sha256"], "the graded file's hash"
    assert extra["isolation"], "how the code under test was isolated, in words"


def test_a_graded_run_writes_valid_results_worth_the_labs_points(tmp_path: Path) -> None:
    """lab-03 graded on the reference: 100 points (grading.toml), every test passed, every file hashed."""
    results_path = tmp_path / "results.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LAB_IMPL", "PYTEST_XDIST", "PYTEST_CURRENT"))}
    env["LAB_IMPL"] = "solution"
    lab = LABS_DIR / "lab-03-streaming-detokenizer"
    done = subprocess.run([sys.executable, "-m", "pytest", str(lab), "-q", "-p", "no:xdist", "-m", "not control",
                           "--tb=no", "--grade", str(results_path)], cwd=REPO_ROOT, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:]
    results = json.loads(results_path.read_text(encoding="utf-8"))
    validate(results)
    assert results["score"] == results["extra_data"]["max_score"] == load_policy().lab("03").points
    assert {t["status"] for t in results["tests"]} == {"passed"}
    assert results["output"] in done.stdout, "the top-level output is the scorecard pytest printed"
    lab_points = results["extra_data"]["labs"]["lab-03"]
    assert {task: entry["max_score"] for task, entry in lab_points["tasks"].items()} == {
        str(task): weight for task, weight in load_policy().lab("03").tasks.items()}
    solution = lab / "solution.py"
    assert results["extra_data"]["files"]["graded"]["lab-03"] == {
        "path": str(solution.relative_to(REPO_ROOT)), "sha256": hashlib.sha256(solution.read_bytes()).hexdigest()}


def test_the_readme_states_the_policys_points() -> None:
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    policy = load_policy()
    assert f"{policy.lab_points} points" in readme, "the README says what a lab is worth (grading.toml's lab_points)"
    for lab_dir in LAB_DIRS:
        lab = policy.lab(lab_dir.name)
        if lab.tasks:
            weights = ", ".join(str(weight) for _, weight in sorted(lab.tasks.items()))
            row = f"| lab-{lab_number(lab_dir.name)} | {lab.points} | {weights} |"
            assert row in readme, f"the README's points table must match grading.toml: missing {row!r}"


# ------------------------------------------------------------------------------ visibility


HIDING_POLICY = minimal(stdout_visibility="visible", visibility_rules=[
    {"tests": "lab-05 task 2 *", "visibility": "after_due_date"},  # a rule on a task
    {"tests": "lab-03 task 1 test_*len*", "visibility": "hidden"},  # a rule on a name pattern
])


def hiding_run(monkeypatch: pytest.MonkeyPatch) -> tuple[dict[str, Any], list[Any]]:
    """A graded run under HIDING_POLICY: what results.json says, and the tests it graded."""
    from mini_vllm.testing import gradescope, grading

    policy = parse_policy(HIDING_POLICY)
    monkeypatch.setattr(grading, "load_policy", lambda: policy)
    monkeypatch.setattr(gradescope, "load_policy", lambda: policy)
    lab_03, lab_05 = "lab-03-streaming-detokenizer", "lab-05-stop-strings"
    graded = [
        grading.GradedTest(lab_03, 1, "the length table", "test_utf8_len_table", 1, passed=False,
                           details="AssertionError: SECRET-LEN: 0xF8 is no lead byte", weight=Fraction(15)),
        grading.GradedTest(lab_03, 2, "feed", "test_feed_ascii", 1, passed=True, weight=Fraction(70)),
        grading.GradedTest(lab_05, 1, "truncate_at_stop", "test_truncate", 1, passed=True, weight=Fraction(30)),
        grading.GradedTest(lab_05, 2, "the hold-back", "test_hold_back", 1, passed=False,
                           details="AssertionError: SECRET-HOLD: held 'ab' after 'xab'", weight=Fraction(55, 2)),
        grading.GradedTest(lab_05, 2, "the hold-back", "test_eager", 1, passed=True, weight=Fraction(55, 2)),
    ]
    student, full = grading.Grader(Path("unused.json")).student_scorecard(graded, "")
    return gradescope.results_document(graded, student, full_scorecard=full), graded


def test_a_hidden_test_leaves_no_trace_in_what_the_student_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    results, _ = hiding_run(monkeypatch)
    validate(results)
    shown = results["output"]
    for secret in ("test_utf8_len_table", "SECRET-LEN", "the length table", "test_hold_back", "test_eager",
                   "SECRET-HOLD", "the hold-back", "/ 55", "/ 15", "/ 200", "/ 85"):
        assert secret not in shown, f"the student's scorecard reveals a hidden test ({secret!r}):\n{shown}"
    assert "feed" in shown and "truncate_at_stop" in shown, f"the visible tasks are still shown:\n{shown}"
    assert "70 / 70" in shown and "30 / 30" in shown and "100 / 100" in shown, (
        f"totals count the visible tests only (lab-03 70, lab-05 30, total 100):\n{shown}")
    assert "hidden for now" in shown and "after the due date" in shown and "never" in shown, (
        f"a line says some tests are hidden and when they show:\n{shown}")
    assert results["stdout_visibility"] == "hidden", "the grading run's output, which names every test, is hidden too"
    by_name = {t["name"].split(" › ")[-1]: t["visibility"] for t in results["tests"]}
    assert by_name["test_utf8_len_table"] == "hidden" and by_name["test_hold_back"] == "after_due_date"
    assert by_name["test_feed_ascii"] == "visible"


def test_the_full_scorecard_is_kept_for_the_instructor(monkeypatch: pytest.MonkeyPatch) -> None:
    results, _ = hiding_run(monkeypatch)
    full = [t for t in results["tests"] if "full scorecard" in t["tags"]]
    assert len(full) == 1, "one entry holds the scorecard of every test"
    assert full[0]["visibility"] == "hidden", "shown no sooner than the most hidden test (here: never)"
    assert full[0]["max_score"] == 0, "it is worth nothing: the grade is the tests' own entries"
    assert "SECRET-HOLD" in full[0]["output"] and "test_utf8_len_table" in full[0]["output"]
    assert results["score"] == 70 + 30 + Fraction(55, 2), "the grade counts every test, hidden or not"


def test_without_hidden_tests_the_student_reads_the_whole_scorecard(monkeypatch: pytest.MonkeyPatch) -> None:
    from mini_vllm.testing import gradescope, grading

    monkeypatch.setattr(grading, "load_policy", lambda: parse_policy(minimal()))
    test = grading.GradedTest("lab-03-streaming-detokenizer", 2, "feed", "test_feed", 1, passed=False,
                              details="AssertionError: feed broke", weight=Fraction(70))
    student, full = grading.Grader(Path("unused.json")).student_scorecard([test], "")
    assert full is None and "feed broke" in student and "hidden" not in student
    assert not [t for t in gradescope.results_document([test], student)["tests"] if "full scorecard" in t["tags"]]
