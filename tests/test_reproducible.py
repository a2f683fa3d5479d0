"""Same code, same grade: the lock file, the start-up check of installed versions, and hypothesis
examples that do not depend on what a command imported (mini_vllm/reproducible.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import tomllib
from packaging.requirements import Requirement

from instructor.contract import LabRun, run_lab_tests
from mini_vllm.labs import LABS_DIR, REPO_ROOT, impl_path, lab_dir
from mini_vllm.reproducible import (
    FIX_COMMAND,
    LOCK_FILE,
    UNLOCKED_EXIT,
    canonical_name,
    check_installed,
    installed_versions,
    mismatches,
    read_lock,
)

LOCKED = read_lock(LOCK_FILE.read_text(encoding="utf-8"))

# ------------------------------------------------------------------ the lock file


def test_lock_pins_the_packages_the_course_installs() -> None:
    for name in ("hypothesis", "pytest", "openai", "anthropic", "tokenizers", "setuptools", "pip"):
        assert name in LOCKED, f"requirements/lock.txt pins no {name}: run `make lock`"


def _course_requirements() -> list[Requirement]:
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    build = (REPO_ROOT / "requirements" / "build.in").read_text(encoding="utf-8").splitlines()
    lines = [*project["dependencies"], *project["optional-dependencies"]["dev"], *build]
    return [Requirement(line) for line in lines if line.strip() and not line.startswith("#")]


def test_every_requirement_of_pyproject_is_locked_at_a_version_it_accepts() -> None:
    """Someone added or tightened a dependency without `make lock`: the lock would install something else."""
    linux_311 = {"python_version": "3.11", "python_full_version": "3.11.7", "sys_platform": "linux",
                 "platform_system": "Linux", "platform_machine": "x86_64", "extra": "dev"}
    stale = []
    for req in _course_requirements():
        if req.marker is not None and not req.marker.evaluate(linux_311):
            continue  # not installed on the lock's platform
        pinned = LOCKED.get(canonical_name(req.name))
        if pinned is None or not req.specifier.contains(pinned, prereleases=True):
            stale.append(f"{req} (locked: {pinned or 'nothing'})")
    assert not stale, f"requirements/lock.txt does not satisfy pyproject.toml: {stale}; run `make lock`"


def test_every_pin_carries_hashes() -> None:
    """pip's --require-hashes mode refuses a file with any pin that has none; say which one first."""
    entries = LOCK_FILE.read_text(encoding="utf-8").split("\n\n")[-1]  # past the header
    blocks = [b for b in entries.replace("\\\n", " ").splitlines() if "==" in b]
    unhashed = [b.split()[0] for b in blocks if "--hash=sha256:" not in b]
    assert len(blocks) == len(LOCKED) and not unhashed, f"pins without a hash: {unhashed}"


def test_the_lock_header_says_how_to_regenerate_it() -> None:
    header = LOCK_FILE.read_text(encoding="utf-8").split("\n\n")[0]
    makefile = (REPO_ROOT / "Makefile").read_text(encoding="utf-8")
    assert "make lock" in header and "uv pip compile" in header and "--generate-hashes" in header, header
    assert "\nlock:" in makefile and "--require-hashes -r $(LOCK)" in makefile


def test_the_installed_packages_are_the_locked_ones() -> None:
    """What CI and a fresh `make install` must give; elsewhere the fix is the command it names."""
    check = check_installed()
    assert check.ok, check.message(graded=False)


# ------------------------------------------------------------------ the start-up check


def test_read_lock_takes_names_and_versions_and_skips_the_rest() -> None:
    text = textwrap.dedent("""\
        # a comment
        Jinja2==3.1.6 \\
            --hash=sha256:aaaa
            # via nbconvert
        jupyter_core==5.9.1 ; sys_platform == "linux" \\
            --hash=sha256:bbbb
        colorama==0.4.6 ; sys_platform == "win32" \\
            --hash=sha256:cccc
        """)
    assert read_lock(text) == {"jinja2": "3.1.6", "jupyter-core": "5.9.1"}


def test_a_different_or_missing_version_is_named_with_both_versions() -> None:
    locked = {"hypothesis": "6.170.17", "openai": "3.57.0", "pytest": "9.1.1"}
    installed = {"hypothesis": "6.171.0", "pytest": "9.1.1", "mini-vllm-course": "0.1.0"}
    found = mismatches(locked, installed)
    assert [str(m) for m in found] == ["hypothesis 6.171.0 (locked: 6.170.17)",
                                       "openai is not installed (locked: 3.57.0)"]


def test_the_same_version_spelled_differently_is_no_mismatch() -> None:
    assert mismatches({"foo": "1.0"}, {"foo": "1.0.0"}) == []


def test_a_fake_mismatch_stops_a_graded_run_and_names_the_fix(tmp_path: Path) -> None:
    lock = tmp_path / "lock.txt"
    lock.write_text("hypothesis==6.170.17 \\\n    --hash=sha256:aaaa\nopenai==3.57.0 \\\n    --hash=sha256:bbbb\n")
    check = check_installed(lock, installed={"hypothesis": "6.99.0", "openai": "3.57.0"})
    assert not check.ok
    stop, warn = check.message(graded=True), check.message(graded=False)
    assert "grading stopped" in stop and "hypothesis 6.99.0 (locked: 6.170.17)" in stop and FIX_COMMAND in stop, stop
    assert warn.startswith("warning:") and "openai" not in warn, warn


def test_another_python_than_the_locks_is_a_mismatch_too(tmp_path: Path) -> None:
    lock = tmp_path / "lock.txt"
    lock.write_text("#   uv pip compile pyproject.toml --python-version 3.11 -o lock.txt\n\nfoo==1.0 \\\n"
                    "    --hash=sha256:aaaa\n")
    assert check_installed(lock, installed={"foo": "1.0"}, python="3.11").ok
    check = check_installed(lock, installed={"foo": "1.0"}, python="3.12")
    assert check.problems == ["Python 3.12 (locked: 3.11)"] and "python3.11" in check.fix, check


def test_a_missing_lock_file_is_a_problem_too(tmp_path: Path) -> None:
    check = check_installed(tmp_path / "nowhere.txt", installed={})
    assert not check.ok and "missing" in check.problems[0]


def test_installed_versions_reads_dist_info_folder_names(tmp_path: Path) -> None:
    for folder in ("Jinja2-3.1.6.dist-info", "jupyter_core-5.9.1.dist-info", "unrelated"):
        (tmp_path / folder).mkdir()
    later = tmp_path / "later"
    (later / "jinja2-2.0.dist-info").mkdir(parents=True)
    assert installed_versions([str(tmp_path), str(later)]) == {"jinja2": "3.1.6", "jupyter-core": "5.9.1"}


_FAKE_VERSION_PLUGIN = """\
import mini_vllm.reproducible as reproducible

_real = reproducible.installed_versions
reproducible.installed_versions = lambda paths=None: {**_real(paths), "hypothesis": "0.0.1"}
"""


@pytest.mark.parametrize("graded", [True, False], ids=["graded", "not graded"])
def test_conftest_stops_a_graded_run_and_warns_any_other(tmp_path: Path, graded: bool) -> None:
    (tmp_path / "fake_versions.py").write_text(_FAKE_VERSION_PLUGIN, encoding="utf-8")
    grade = ["--grade", str(tmp_path / "results.json")] if graded else []
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "tests/test_labs_loader.py", "-q", "-p", "no:xdist", "-p", "fake_versions",
         "-k", "test_default_is_the_solution", *grade],
        cwd=REPO_ROOT, env={**_clean_env(), "PYTHONPATH": str(tmp_path)}, capture_output=True, text=True, timeout=120)
    output = done.stdout + done.stderr
    assert "hypothesis 0.0.1 (locked: " in output and "make install" in output, output
    if graded:
        assert done.returncode == UNLOCKED_EXIT and "grading stopped" in output, output
        assert not (tmp_path / "results.json").exists(), "a stopped grading wrote results"
    else:
        assert done.returncode == 0 and "warning: the installed packages" in output, output


def _clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("LAB_IMPL", "PYTEST_XDIST", "PYTEST_CURRENT"))}


# ------------------------------------------------------------------ hypothesis examples


_DRAW_EXAMPLES = """\
import json, sys
from hypothesis import given, settings, strategies as st
if sys.argv[1] == "frozen":
    from mini_vllm.reproducible import freeze_hypothesis_constants
    freeze_hypothesis_constants()
if sys.argv[2] == "import":
    sys.path.insert(0, sys.argv[3])
    import literals  # a local module full of string and integer literals
seen = []

@settings(derandomize=True, database=None, max_examples=200)
@given(st.text(), st.integers())
def collect(text, number):
    seen.append([text, number])

collect()
print(json.dumps(seen))
"""


def _draw(tmp_path: Path, frozen: bool, imports: bool) -> list[Any]:
    literals = tmp_path / "literals.py"
    if not literals.exists():
        literals.write_text("".join(f"WORD_{i} = 'literal-{i}-ü'\nNUMBER_{i} = {7919 * i}\n" for i in range(200)))
    done = subprocess.run([sys.executable, "-c", _DRAW_EXAMPLES, "frozen" if frozen else "live",
                           "import" if imports else "none", str(tmp_path)],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=120, check=True)
    return json.loads(done.stdout)


@pytest.mark.control
def test_unfrozen_hypothesis_draws_from_whatever_was_imported(tmp_path: Path) -> None:
    """Why the freeze exists: the same derandomized test draws other examples once a module is imported."""
    assert _draw(tmp_path, frozen=False, imports=True) != _draw(tmp_path, frozen=False, imports=False)


def test_frozen_hypothesis_draws_the_same_examples_whatever_was_imported(tmp_path: Path) -> None:
    with_import, without = _draw(tmp_path, frozen=True, imports=True), _draw(tmp_path, frozen=True, imports=False)
    assert with_import == without, "the examples changed with an import: hypothesis mined its literals"
    assert not any(str(text).startswith("literal-") for text, _ in with_import)


# ------------------------------------------------------------------ one submission, three commands

# The submission of issue 24: lab-02 builds lab-04's detokenizer without the prompt, so a reply whose
# first token's text depends on the prompt (a SentencePiece reply that starts with a space) comes out
# wrong. It scored 109 / 110 under `make lab-02` and 110 / 110 under `make grade` and under
# `make lab-02 ARGS="-k several"`, because hypothesis drew other examples under each. It is written
# out whole, as a student's file is, so it runs in the sandbox as `make` runs it.
_RIGHT = "tokenizer, prompt_ids, skip_special_tokens=params.skip_special_tokens)"
_WRONG = "tokenizer, [], skip_special_tokens=params.skip_special_tokens)"


def _drops_the_prompt(folder: Path) -> Path:
    reference = impl_path("lab-02", "solution").read_text(encoding="utf-8")
    assert reference.count(_RIGHT) == 1, f"lab-02's solution no longer builds lab-04 as {_RIGHT!r}: update this test"
    submission = folder / "drops_the_prompt.py"
    submission.write_text(reference.replace(_RIGHT, _WRONG), encoding="utf-8")
    return submission


def _outcomes(run: LabRun, lab: str) -> dict[str, float]:
    assert run.tests, f"no results from the grading:\n{run.output[-3000:]}"
    return {t["name"]: t["score"] for t in run.tests if t["name"].startswith(lab)}


@pytest.mark.slow  # grades one submission three times over, each through the sandbox
def test_one_submission_gets_the_same_results_under_three_commands(tmp_path: Path) -> None:
    env = {"LAB_SANDBOX": "1", "LAB_IMPL": "solution", "LAB_IMPL_02": str(_drops_the_prompt(tmp_path))}
    graded = ["-p", "no:xdist", "-m", "not control"]  # as the Makefile's graded runs
    lab = lab_dir("02").name
    alone = _outcomes(run_lab_tests(lab_dir("02"), env, args=graded), lab)  # make lab-02
    # make grade: every lab's tests collected (every test module imported, which is what moved hypothesis's
    # examples) and lab-01's run first; the labs after lab-02 are deselected, since a test that runs after
    # lab-02's cannot change their results (they cost about 40 s of CPU here).
    later = [f"--deselect={d.relative_to(REPO_ROOT)}" for d in sorted(LABS_DIR.glob("lab-*")) if d.name[4:6] > "02"]
    as_make_grade = ["-n", "2", "--dist", "loadfile", "-m", "not control"]  # two labs at once, as `make grade` runs
    every_lab = _outcomes(run_lab_tests(LABS_DIR, env, args=[*as_make_grade, *later]), lab)
    selected = _outcomes(run_lab_tests(lab_dir("02"), env, args=[*graded, "-k", "several or prompt"]), lab)
    assert alone.keys() == every_lab.keys() and selected and selected.keys() <= alone.keys(), (
        f"the commands graded different tests: {sorted(alone.keys() ^ every_lab.keys())}")
    differ = {name: (alone[name], every_lab[name]) for name in alone if alone[name] != every_lab[name]}
    assert not differ, f"make lab-02 and make grade disagree (lab-02 alone, every lab): {differ}"
    differ = {name: (alone[name], selected[name]) for name in selected if alone[name] != selected[name]}
    assert not differ, f"make lab-02 and make lab-02 ARGS='-k ...' disagree (all of lab-02, selected): {differ}"
