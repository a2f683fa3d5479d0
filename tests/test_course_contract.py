"""The course contract, checked: every lab keeps the promises the README makes.

- a lab folder holds its four files (plus data it needs);
- starter and solution expose the same public names and signatures;
- against the blank starter, every graded test fails with that lab's NotImplementedError
  (no collection errors, no hangs), and the control tests still pass;
- every named wrong variant is caught by the tests it names, and loses points only in the
  tasks it declares (a bug in task N costs points in task N only);
- the scorecard counts what was selected (``-k``), and a selected test that never ran (``-x``)
  or was skipped counts as failed;
- a stream table's expected column never shows the student's own output (graded against a
  canary that marks everything it returns), and every failure opens with the rule that broke.
"""

from __future__ import annotations

import ast
import functools
import json
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from instructor.canary import CANARY, write_canary
from instructor.contract import LabRun, run_jobs, run_lab_tests, task_of
from instructor.variants import Job, Variant
from mini_vllm.labs import LABS_DIR, REPO_ROOT, lab_number, load_lab
from mini_vllm.testing.api import public_api
from mini_vllm.testing.grading import failure_hint
from mini_vllm.testing.trace import TRACE_LOG_ENV

# A batch grades a lab several times through the grading sandbox: on a loaded machine that can take
# longer than pytest-timeout's default for one test, and the batch has its own bound (run_jobs).
pytestmark = [pytest.mark.contract, pytest.mark.timeout(1200)]

LAB_DIRS = sorted(p for p in LABS_DIR.iterdir() if p.is_dir() and p.name.startswith("lab-"))
LAB_FILES = {"README.md", "starter.py", "solution.py", "test_lab.py"}
VARIANTS_DIR = REPO_ROOT / "instructor" / "wrong_variants"
VARIANTS = sorted(VARIANTS_DIR.glob("lab_*/*.py"))
# Dishonest submissions for every lab, each appended to the lab's starter: a "universal liar" (every name returns
# an object that says yes to everything) and one whose every function returns the empty value of its type.
EVERY_LAB = REPO_ROOT / "instructor" / "dishonest" / "every_lab"
NOTHING_DONE = sorted(p.stem for p in EVERY_LAB.glob("*.py"))


def test_labs_exist() -> None:
    assert LAB_DIRS, f"no labs under {LABS_DIR}"


@pytest.mark.parametrize("lab_dir", LAB_DIRS, ids=lambda d: d.name)
def test_lab_folder_holds_its_files(lab_dir: Path) -> None:
    present = {p.name for p in lab_dir.iterdir() if not p.name.startswith((".", "__"))}
    assert present >= LAB_FILES, f"{lab_dir.name} is missing {sorted(LAB_FILES - present)}"
    stray_code = sorted(name for name in present - LAB_FILES if name.endswith(".py"))
    assert not stray_code, f"{lab_dir.name} has extra modules {stray_code}: helpers belong in mini_vllm"


@pytest.mark.parametrize("lab_dir", LAB_DIRS, ids=lambda d: d.name)
def test_starter_and_solution_expose_the_same_api(lab_dir: Path) -> None:
    starter = public_api(load_lab(lab_dir.name, "starter"))
    solution = public_api(load_lab(lab_dir.name, "solution"))
    differences = {name: (starter.get(name), solution.get(name))
                   for name in starter.keys() | solution.keys() if starter.get(name) != solution.get(name)}
    assert not differences, f"starter vs solution (starter, solution): {differences}"


# ------------------------------------------ grading a lab in child processes, many times each


# Every lab is graded many times: against its blank starter, its canary (below) and each of its
# named wrong variants. A child process grades a batch of these in a row (instructor.variants):
# a process per grading would pay Python's start-up, the heavy imports and the real vocabularies'
# loading each time. A lab's first batch grades its blank starter, its canary and its first variant
# (make test); the other variants go in batches of up to twelve (make check), which pytest-xdist
# spreads over the workers. A batch's start costs 1-4 s of CPU (lab-10's loads Tekken twice), a variant
# 0.5-4 s: twelve keep the starts few and the largest batch under a minute.
VARIANTS_PER_PROCESS = 12


def batch_of(variant: Path) -> str:
    same_lab = [v for v in VARIANTS if v.parent == variant.parent]
    position, later = same_lab.index(variant), len(same_lab) - 1
    if position == 0:
        return f"{variant.parent.name}-0"
    batches = -(-later // VARIANTS_PER_PROCESS)  # at most VARIANTS_PER_PROCESS each, the sizes even
    return f"{variant.parent.name}-{1 + (position - 1) * batches // later}"


def first_batch(lab_dir: Path) -> str:
    return f"lab_{lab_number(lab_dir.name)}-0"


@dataclass(frozen=True)
class Batch:
    runs: dict[str, LabRun]  # by job name: a variant's stem, "blank-starter", "canary"
    canary_tables: list[dict[str, Any]]  # every stream table the canary's failures printed (first batch)


# The blank starter, the canary and each lab's first variant are graded through the grading
# sandbox, as a student's file is. The other variants are the instructor's own files and run in
# the grading process, which is several times cheaper; `make contract-sandboxed` (or
# COURSE_CONTRACT_SANDBOX=all) grades every one of them through the sandbox as well, except a
# variant that only tests marked in_process_only can catch (they are not graded in the sandbox).
def through_sandbox(variant: Path) -> bool:
    first = next(v for v in VARIANTS if v.parent == variant.parent)
    lab_dir = next(d for d in LAB_DIRS if f"lab_{lab_number(d.name)}" == variant.parent.name)
    if set(Variant.read(variant).must_fail) <= in_process_only(lab_dir):
        return False
    return os.environ.get("COURSE_CONTRACT_SANDBOX") == "all" or variant == first


@functools.cache
def in_process_only(lab_dir: Path) -> frozenset[str]:
    """The lab's tests marked in_process_only: they count inside the lab's process, so are graded only there."""
    tree = ast.parse((lab_dir / "test_lab.py").read_text(encoding="utf-8"))
    return frozenset(node.name for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)
                     and any("in_process_only" in ast.unparse(d) for d in node.decorator_list))


@functools.cache
def graded(batch: str) -> Batch:
    """Grade one batch of a lab in one child process (cached: each batch runs once)."""
    lab_part, index = batch.rsplit("-", 1)
    lab_dir = next(d for d in LAB_DIRS if f"lab_{lab_number(d.name)}" == lab_part)
    jobs = [Job(v.stem, {} if through_sandbox(v) else {"LAB_SANDBOX": "0"}, variant=v)
            for v in VARIANTS if batch_of(v) == batch]
    with tempfile.TemporaryDirectory() as scratch:
        log = Path(scratch) / "traces.jsonl"
        if index == "0":
            number = lab_number(lab_dir.name)
            canary = write_canary(lab_dir.name, Path(scratch))
            jobs = [Job("blank-starter", {"LAB_IMPL": "starter"}),
                    *(Job(kind, {f"LAB_IMPL_{number}": str(nothing_done(kind, lab_dir, Path(scratch)))})
                      for kind in NOTHING_DONE),
                    Job("canary", {f"LAB_IMPL_{number}": str(canary), TRACE_LOG_ENV: str(log),
                                   "LAB_SANDBOX_TRUSTED": "1"}),
                    *jobs]
        runs = run_jobs(lab_dir, jobs)
        tables = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()] if log.exists() else []
    return Batch(runs, tables)


def nothing_done(kind: str, lab_dir: Path, folder: Path) -> Path:
    """The lab's starter with ``instructor/dishonest/every_lab/<kind>.py`` after it: a submission of no task."""
    path = folder / f"{kind}.py"
    path.write_text((lab_dir / "starter.py").read_text(encoding="utf-8") + "\n\n"
                    + (EVERY_LAB / f"{kind}.py").read_text(encoding="utf-8"), encoding="utf-8")
    return path


def in_first_batch(lab_dir: Path) -> object:
    # Under pytest-xdist (--dist loadgroup) a group keeps a batch's tests on one worker, so its
    # child process runs once, not once per worker that happens to get one of its tests.
    return pytest.param(lab_dir, id=lab_dir.name, marks=[pytest.mark.xdist_group(first_batch(lab_dir))])


def variant_param(variant: Path) -> object:
    same_worker = pytest.mark.xdist_group(batch_of(variant))
    # make test grades each lab's first batch (its blank starter, its canary and its first variant, all
    # three through the sandbox); make check grades every batch, so every variant.
    later = [] if batch_of(variant).endswith("-0") else [pytest.mark.slow]
    return pytest.param(variant, id=f"{variant.parent.name}/{variant.stem}", marks=[same_worker, *later])


@pytest.mark.parametrize("lab_dir", [in_first_batch(d) for d in LAB_DIRS])
def test_blank_starter_fails_every_graded_test_with_not_implemented(lab_dir: Path) -> None:
    run = graded(first_batch(lab_dir)).runs["blank-starter"]
    assert run.returncode == 1, f"pytest should report failed tests (exit 1), got {run.returncode}:\n{run.output}"
    assert run.tests, f"no graded tests ran:\n{run.output}"
    own = f"lab-{lab_number(lab_dir.name)}"

    def failed_cleanly(test: dict[str, Any]) -> bool:
        # A test that composes other labs (tag "composes lab-03") may stop at their starter first.
        labs = [own, *(tag.removeprefix("composes ") for tag in test.get("tags", []))]
        return (test["score"] == 0 and "NotImplementedError" in test["output"]
                and any(f"{lab} task" in test["output"] for lab in labs))

    wrong = [t["name"] for t in run.tests if not failed_cleanly(t)]
    assert not wrong, f"these did not fail with the lab's NotImplementedError ({own} task ...): {wrong}"
    # Controls run the naive approach written in the test file: they pass whatever LAB_IMPL says,
    # and, not being graded, they stay out of results.json.
    controls = (lab_dir / "test_lab.py").read_text(encoding="utf-8").count("@pytest.mark.control")
    assert controls, "each lab keeps a control test proving the bug is real"
    passed = re.search(r"(\d+) passed", run.output)
    assert f"{len(run.tests)} failed" in run.output and passed and int(passed.group(1)) >= controls, (
        f"every graded test fails and every control (at least {controls}) passes:\n{run.output[-800:]}")
    assert not [t for t in run.tests if "control" in t["name"]], "results.json must hold graded tests only"
    # Even under -q, the run ends by saying whose code it graded.
    # (lab-02's line goes on to say whose stages its pipeline composed: starters too, here.)
    assert run.output.rstrip().splitlines()[-1].startswith("graded: starter.py (your code)"), run.output[-500:]


# Where a lab's own tests still pay code that returns empty values (measured: make lab-NN with returns_empty).
# Each would be a lab test's doing, not the sandbox's: a cost or memory test that reads its count without
# checking the answer (issue 42 item 1), a test that passes when the run it depends on breaks another task's rule,
# or one whose cases an empty answer satisfies. Strict: when a lab's tests stop paying, its entry goes. None is
# left: lab-02's, lab-03's and lab-07's went (an empty stream no longer equals an empty stream, the length table
# is one test, an empty event stream fails the SDK-type tests), and lab-04's (its tasks 3 and 4 excuse a case
# whose run without the prompt breaks another task's rule only in code that gets the task's simplest case right,
# and test_no_replacement_chars_for_valid_text first requires the plain words before a split character).
STILL_PAYS_EMPTY: dict[str, str] = {}


def nothing_done_param(lab_dir: Path, kind: str) -> object:
    marks: list[Any] = [pytest.mark.xdist_group(first_batch(lab_dir))]
    still = STILL_PAYS_EMPTY.get(lab_number(lab_dir.name)) if kind == "returns_empty" else None
    if still:
        marks.append(pytest.mark.xfail(strict=True, reason=f"the lab's tests still pay an empty answer: {still}"))
    return pytest.param(lab_dir, kind, id=f"{lab_dir.name}-{kind}", marks=marks)


@pytest.mark.parametrize(("lab_dir", "kind"), [nothing_done_param(d, k) for d in LAB_DIRS for k in NOTHING_DONE])
def test_a_submission_that_implements_nothing_earns_nothing(lab_dir: Path, kind: str) -> None:
    """Graded beside the blank starter, through the sandbox: a universal liar, and code that returns empty values.

    A test's question (``in``, ``bool``, ``len``, ``==``) is asked of plain data of the type the lab's API states,
    checked on the trusted side (mini_vllm/sandbox/declared.py), never of an object of the child; and a test
    that measures work measures it for code that is right.
    """
    run = graded(first_batch(lab_dir)).runs[kind]
    assert run.tests, f"{kind}: no graded test ran:\n{run.output[-1500:]}"
    earned = [f"{t['name']}: {t['score']:.2f}" for t in run.tests if t["score"] > 0]
    assert run.results["score"] == 0 and not earned, (
        f"{lab_dir.name}: {kind} implements no task, so it must earn nothing; it got {run.results['score']}:\n"
        + "\n".join(earned))


@pytest.mark.parametrize("lab_dir", [in_first_batch(d) for d in LAB_DIRS])
def test_the_slowest_honest_call_uses_under_a_tenth_of_its_budget(lab_dir: Path) -> None:
    """The canary (the reference, marking what it returns) is graded through the sandbox, which records what
    each call cost in CPU time: the lab's budget in grading.toml must leave ten times its slowest call, and
    what crossed and what the trusted side served must stay far below their bounds for one message and one
    test (mini_vllm/sandbox)."""
    from mini_vllm.sandbox.peer import MAX_MESSAGE
    from mini_vllm.sandbox.remote import BYTES_PER_TEST, SERVED_PER_TEST_S

    lab = f"lab-{lab_number(lab_dir.name)}"
    run = graded(first_batch(lab_dir)).runs["canary"]
    cost = (run.results.get("extra_data", {}).get("call_costs") or {}).get(lab)
    assert cost and cost["calls"] > 0, f"the canary's grading recorded no call into {lab}: {run.output[-800:]}"
    if not cost["cpu_measured"]:
        pytest.skip("this machine does not report a process's CPU time (/proc)")
    assert cost["slowest_cpu_s"] < cost["budget_cpu_s"] / 10, (
        f"{lab}'s slowest honest call, {cost['slowest_call']}, used {cost['slowest_cpu_s']} s of CPU: its budget "
        f"(call_budget_s in grading.toml, {cost['budget_cpu_s']} s) must be at least ten times that")
    assert cost["largest_message_bytes"] < MAX_MESSAGE / 8 and cost["most_bytes_in_a_test"] < BYTES_PER_TEST / 8, (
        f"{lab}'s honest replies come near the bounds on what crosses: {cost}")
    assert cost["most_served_cpu_s_in_a_test"] < SERVED_PER_TEST_S / 10, (
        f"{lab}'s honest tests have the trusted side serve near the bound on one test's serving: {cost}")


@pytest.mark.parametrize("variant", [variant_param(v) for v in VARIANTS])
def test_wrong_variant_is_caught_and_costs_points_only_in_its_tasks(variant: Path,
                                                                   request: pytest.FixtureRequest) -> None:
    if getattr(request.config.option, "loadgroup", False):  # a pytest-xdist worker under --dist loadgroup
        assert request.node.nodeid.endswith(f"@{batch_of(variant)}"), (
            f"pytest-xdist ignored the xdist_group mark ({request.node.nodeid}), so every worker re-runs "
            "the whole variant batch: see the pytest cap in pyproject.toml (pytest-xdist#1386)")
    declared = Variant.read(variant)
    run = graded(batch_of(variant)).runs[variant.stem]
    assert run.tests, f"{variant.stem}: no graded test ran:\n{run.output}"
    missing = [name for name in declared.must_fail if not run.named(name)]
    assert not missing, f"{variant.stem}: MUST_FAIL names tests that do not exist: {missing}\n{run.output}"
    misfiled = sorted({f"{name} (task {task_of(t)})" for name in declared.must_fail for t in run.named(name)
                       if task_of(t) not in declared.may_cost})
    assert not misfiled, f"{variant.stem}: MUST_FAIL tests outside its MAY_COST tasks {declared.may_cost}: {misfiled}"
    escaped = [name for name in declared.must_fail if not run.failed(name)]
    assert not escaped, f"{variant.stem} passed tests that should catch it: {escaped}"
    elsewhere = [t["name"] for t in run.tests if task_of(t) not in declared.may_cost and t["score"] < t["max_score"]]
    assert not elsewhere, (f"{variant.stem} is a bug in task(s) {list(declared.may_cost)} only, but lost points in: "
                           f"{elsewhere}")


# ------------------------------------------------- the scorecard counts what was selected


LAB_03 = next(d for d in LAB_DIRS if d.name.startswith("lab-03"))


def test_deselected_tests_earn_no_points() -> None:
    """`make lab-03 ARGS="-k flush"` on a blank starter: the three flush tests fail, the rest never ran."""
    run = run_lab_tests(LAB_03, {"LAB_IMPL": "starter"}, args=["-k", "flush"])
    selected = len(run.tests)
    assert selected and all("flush" in t["name"] for t in run.tests), (
        f"results.json must list the selected tests only: {[t['name'] for t in run.tests]}")
    assert run.results["score"] == 0 and run.results["extra_data"]["max_score"] == pytest.approx(
            sum(t["max_score"] for t in run.tests)), (
        f"a blank starter earns nothing, and the maximum is what ran, not the whole lab: {run.results}")
    partial = re.search(rf"Partial run: {selected} of (\d+) graded tests selected", run.output)
    assert partial and int(partial.group(1)) > selected, f"the scorecard must say how much was selected:\n{run.output}"
    assert partial.group(0) in run.results["output"], "results.json says it too"


def test_a_run_that_selects_nothing_claims_nothing() -> None:
    run = run_lab_tests(LAB_03, {"LAB_IMPL": "solution"}, args=["-k", "no_test_is_called_this"])
    assert run.returncode == 5, f"pytest reports 'no tests ran' (exit 5), got {run.returncode}"
    assert (run.results["score"], run.results["extra_data"]["max_score"], run.tests) == (0, 0, []), (
        f"zero tests selected is zero points of zero, not full marks: {run.results}")
    assert "No graded test was selected" in run.output, run.output[-600:]


LAB_01 = next(d for d in LAB_DIRS if d.name.startswith("lab-01"))


def test_a_cost_test_is_graded_in_the_sandbox_too() -> None:
    """lab-01's cost test is counted on the trusted side (the child's fresh pages, from /proc), so the sandbox grades
    it as the lab's own process does: no cost test is worth 0 there (issue 42)."""
    selected = ["-k", "cost_per_character or test_calls_stream_only_when_asked"]
    for sandbox in ("1", "0"):
        run = run_lab_tests(LAB_01, {"LAB_IMPL": "solution", "LAB_SANDBOX": sandbox}, args=selected)
        costs = [t for t in run.tests if "cost_per_character" in t["name"]]
        assert len(costs) == 3 and all(t["score"] == t["max_score"] > 0 for t in costs), (
            f"the cost test is graded (LAB_SANDBOX={sandbox}), and the reference earns it: {run.tests}")
        assert run.results["score"] == run.results["extra_data"]["max_score"] > 0, run.results
        assert "not graded in the grading sandbox" not in run.output, run.output[-1500:]


def test_tests_that_never_ran_earn_no_points() -> None:
    """`-x` stops at the first failure: the tests after it were selected, never ran, and count as failed.

    Points never shrink: the maximum is every selected graded test, whatever ran, so stopping a run
    early (or making tests skip) cannot raise a score's share.
    """
    run = run_lab_tests(LAB_03, {"LAB_IMPL": "starter"}, args=["-x"])
    unrun = [t for t in run.tests if t["output"] == "did not run, so not graded"]
    assert len(run.tests) > 1 and len(unrun) == len(run.tests) - 1, (
        f"every selected test is a result, and those that never ran say so: {run.results}")
    total = run.results["extra_data"]["max_score"]
    assert total == pytest.approx(sum(t["max_score"] for t in run.tests), abs=0.01) and run.results["score"] == 0, (
        f"the maximum counts the tests that never ran: {run.results}")
    assert re.search(r"graded tests selected, 1 ran", run.output), run.output[-600:]


# ------------------------------------ the expected column comes from an oracle, always


# What a failure's first line (the one the scorecard shows) must not be: parameters alone or followed
# by a dump of values, a step or seed number with no rule after it, a table's heading, or pytest's
# words for ours.
NOT_A_RULE = re.compile(r"^(?:\w+=\S+(?:, \w+=\S+)*$|\w+=[^:]*: [\[('\"]|(?:step|seed) \d+:?$|step\s+(?:call|token)\b"
                        r"|\(|DID NOT RAISE|assert\b|\w*Error$|Failed: DID NOT)")


# A lab whose code returns no text (lab-09: lexeme ids, token ids, booleans, checkpoints) gives the canary
# nothing to mark; its tables' expected columns are lark's and llguidance's answers, built in the test.
TEXTLESS_LABS = {"09"}
TRACING_LABS = [d for d in LAB_DIRS if "format_trace(" in (d / "test_lab.py").read_text(encoding="utf-8")
                and lab_number(d.name) not in TEXTLESS_LABS]


@pytest.mark.parametrize("lab_dir", [in_first_batch(d) for d in TRACING_LABS])
def test_expected_column_always_comes_from_an_oracle(lab_dir: Path) -> None:
    """Grade an implementation whose every output carries a marker: no table may show it as "expected"."""
    batch = graded(first_batch(lab_dir))
    run, tables = batch.runs["canary"], batch.canary_tables
    assert [t for t in run.tests if t["score"] < t["max_score"]], (
        f"the canary (it marks everything it returns) must fail the lab's tests:\n{run.output[-1500:]}")
    assert tables, f"{lab_dir.name}: no stream table was printed, so this check proves nothing"
    leaked = sorted({f"{t['rule'].splitlines()[0]}  (its {t['columns'][1]!r} column)" for t in tables
                     if any(CANARY in (e or "") for e in t["expected"])})
    assert not leaked, (f"{lab_dir.name}: these tables show the code under test's own output where the oracle's "
                        "answer belongs; it must come from an oracle the student did not write:\n" + "\n".join(leaked))
    marked = [t for t in tables if any(CANARY in e for e in t["emitted"])]
    assert marked, f"{lab_dir.name}: the marker never reached a table's output column, so this check proves nothing"


@pytest.mark.parametrize("lab_dir", [in_first_batch(d) for d in LAB_DIRS])
def test_every_failure_opens_with_the_rule(lab_dir: Path) -> None:
    """The first line of each failure (what the scorecard shows) is a rule, not a parameter line or a table."""
    run = graded(first_batch(lab_dir)).runs["canary"]
    assert run.tests, f"{lab_dir.name}: no graded test ran on the canary:\n{run.output[-1500:]}"
    own = f"lab-{lab_number(lab_dir.name)}"
    openings = {t["name"].split(" › ")[-1]: failure_hint(t["output"], own, task_of(t))[0] for t in run.tests}
    bad = sorted(f"{name}: {line[:100]}" for name, line in openings.items() if NOT_A_RULE.match(line))
    assert not bad, f"{lab_dir.name}: failures that do not open with the rule that broke:\n" + "\n".join(bad)


@pytest.mark.parametrize(("line", "is_a_rule"), [
    ("starts_in_reasoning=False, implicit_end_tags=('<tool_call>',)", False),  # the example
    ("skip_special_tokens=False: ['<|im_start|>', 'assistant']", False),
    ("seed 0", False), ("step  call  chunk  emitted  expected", False), ("DID NOT RAISE <class 'TypeError'>", False),
    ("stop=None means no stop strings (as in the API)", True), ("seed 3: the prose must come out as written", True),
    ("after '<think>x <tool': '<tool' could still become a tag, so hold it", True),
], ids=["params", "params-then-values", "seed", "heading", "pytest", "param-rule", "seed-rule", "rule"])
def test_the_rule_check_itself(line: str, is_a_rule: bool) -> None:
    assert (NOT_A_RULE.match(line) is None) == is_a_rule, line
