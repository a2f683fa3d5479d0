"""The course contract, checked: every lab keeps the promises the README makes.

- a lab folder holds its four files (plus data it needs);
- starter and solution expose the same public names and signatures;
- against the blank starter, every graded test fails with that lab's NotImplementedError
  (no collection errors, no hangs), and the control tests still pass;
- every named wrong variant is caught by the tests it names.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest

from mini_vllm.labs import LABS_DIR, lab_number, load_lab
from mini_vllm.testing.contract import public_api, run_lab_tests

pytestmark = pytest.mark.contract

LAB_DIRS = sorted(p for p in LABS_DIR.iterdir() if p.is_dir() and p.name.startswith("lab-"))
LAB_FILES = {"README.md", "starter.py", "solution.py", "test_lab.py"}
VARIANTS_DIR = Path(__file__).parent / "wrong_variants"
VARIANTS = sorted(VARIANTS_DIR.glob("lab_*/*.py"))


def lab_for_variant(variant: Path) -> Path:
    number = variant.parent.name.removeprefix("lab_")
    return next(d for d in LAB_DIRS if lab_number(d.name) == number)


def must_fail(variant: Path) -> list[str]:
    """The variant's MUST_FAIL list, read without importing it."""
    for node in ast.parse(variant.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "MUST_FAIL" for t in node.targets):
            return list(ast.literal_eval(node.value))
    raise AssertionError(f"{variant} has no MUST_FAIL list")


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


@pytest.mark.parametrize("lab_dir", LAB_DIRS, ids=lambda d: d.name)
def test_blank_starter_fails_every_graded_test_with_not_implemented(lab_dir: Path) -> None:
    run = run_lab_tests(lab_dir, {"LAB_IMPL": "starter"})
    assert run.returncode == 1, f"pytest should report failed tests (exit 1), got {run.returncode}:\n{run.output}"
    graded = [t for t in run.tests if t["max_score"] > 0]
    controls = [t for t in run.tests if t["max_score"] == 0]
    assert graded, f"no graded tests ran:\n{run.output}"
    own = f"lab-{lab_number(lab_dir.name)}"

    def failed_cleanly(test: dict[str, Any]) -> bool:
        # A test that composes other labs (tag "composes lab-03") may stop at their starter first.
        labs = [own, *(tag.removeprefix("composes ") for tag in test.get("tags", []))]
        return (test["score"] == 0 and "NotImplementedError" in test["output"]
                and any(f"{lab} task" in test["output"] for lab in labs))

    wrong = [t["name"] for t in graded if not failed_cleanly(t)]
    assert not wrong, f"these did not fail with the lab's NotImplementedError ({own} task ...): {wrong}"
    assert controls, "each lab keeps a control test proving the bug is real"
    # Controls run the naive approach written in the test file: they pass whatever LAB_IMPL says.
    assert f"{len(controls)} passed" in run.output, run.output


@pytest.mark.parametrize("variant", VARIANTS, ids=lambda v: f"{v.parent.name}/{v.stem}")
def test_wrong_variant_is_caught(variant: Path) -> None:
    lab_dir = lab_for_variant(variant)
    names = must_fail(variant)
    run = run_lab_tests(lab_dir, {f"LAB_IMPL_{lab_number(lab_dir.name)}": str(variant)}, select=names)
    missing = [name for name in names if not run.named(name)]
    assert not missing, f"{variant.stem}: MUST_FAIL names tests that do not exist: {missing}\n{run.output}"
    escaped = [name for name in names if not run.failed(name)]
    assert not escaped, f"{variant.stem} passed tests that should catch it: {escaped}"
