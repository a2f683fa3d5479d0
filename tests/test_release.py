"""``make release``: the student's repository holds no answer, and every lab can be worked in it.

A release is built into a temporary folder once per module; its own ``make grade`` then runs
with this checkout's ``.venv`` (told that it is installed, so nothing is reinstalled), exactly
as a student types it, from inside the release.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from instructor.release import LEFT_OUT_FILES, WINDOW, build, forbidden, leaks, ships
from mini_vllm.labs import LABS_DIR

# The student release (built and graded whole): in make check, not make test.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("release")]
VENV = Path(sys.executable).parent.parent


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory) -> Path:
    dest = tmp_path_factory.mktemp("release") / "course"
    build(dest)
    return dest


def student_env() -> dict[str, str]:
    """The environment a student has: no LAB_IMPL choice, nothing of this pytest run."""
    chosen_here = ("LAB_IMPL", "LAB_COMPOSE", "PYTEST_", "PYTHONPATH")
    return {k: v for k, v in os.environ.items() if not k.startswith(chosen_here)}


def test_release_ships_no_solution_and_nothing_of_the_instructor(release: Path) -> None:
    found = forbidden(release)
    assert not found, f"the release must not hold these files: {found[:10]}"
    labs = sorted(p.name for p in (release / LABS_DIR.relative_to(LABS_DIR.parents[1])).iterdir() if p.is_dir())
    assert labs == sorted(p.name for p in LABS_DIR.iterdir() if p.is_dir()), f"every lab ships: {labs}"


@pytest.mark.slow
def test_the_releases_gitignore_keeps_the_venv_and_caches_out_of_a_students_repository(release: Path) -> None:
    ignored = {line.strip().rstrip("/") for line in (release / ".gitignore").read_text(encoding="utf-8").splitlines()}
    assert {".venv", "__pycache__", ".hypothesis", "build", "results.json"} <= ignored, sorted(ignored)


def test_no_run_of_solution_lines_appears_in_the_release(release: Path) -> None:
    found = leaks(release)
    assert not found, (f"{len(found)} runs of {WINDOW} consecutive lines of a solution.py (lines its starter does "
                       "not have) are in the release:\n  " + "\n  ".join(found[:10]))


def test_the_leak_check_finds_solution_lines_pasted_anywhere(tmp_path: Path) -> None:
    """The check itself can fail: three lines of lab-03's answer pasted into any file are found."""
    solution = LABS_DIR.glob("lab-03-*/solution.py").__next__()
    given = {line.strip() for line in (solution.parent / "starter.py").read_text(encoding="utf-8").splitlines()}
    lines = [line for line in solution.read_text(encoding="utf-8").splitlines() if line.strip()]
    start = next(i for i in range(len(lines)) if not given.intersection(s.strip() for s in lines[i : i + WINDOW]))
    (tmp_path / "notes.md").write_text("my notes\n\n" + "\n\n".join(lines[start : start + WINDOW]) + "\n")
    found = leaks(tmp_path)
    assert found and "notes.md" in found[0], f"three answer lines (blank lines between) must be found: {found}"


def test_release_is_one_commit_with_everything_committed(release: Path) -> None:
    count = subprocess.run(["git", "rev-list", "--count", "HEAD"], cwd=release, capture_output=True, text=True)
    status = subprocess.run(["git", "status", "--porcelain"], cwd=release, capture_output=True, text=True)
    assert (count.stdout.strip(), status.stdout) == ("1", ""), (
        f"one commit, nothing left out of it: {count.stdout.strip()} commits, status {status.stdout[:300]!r}")


def test_release_grades_blank_starters_as_a_clean_zero(release: Path) -> None:
    """The student's `make grade`: every lab collected and scored 0, each test failing on its stub, lab-02 and
    lab-07 included (they run on recorded data and the student's own labs, not on a reference). The recorded
    data is read before any stub is called, so a recording missing from the release fails here too; that it
    grades a correct lab in full is what the instructor's own runs of lab-02 and lab-07 on it show."""
    done = subprocess.run(["make", "grade", f"VENV={VENV}", "-o", f"{VENV}/.installed"], cwd=release,
                          env=student_env(), capture_output=True, text=True, timeout=600)
    output = done.stdout + done.stderr
    broken = [line for line in output.splitlines() if line.startswith(("ERROR", "Interrupted", "ImportError"))
              or "during collection" in line]
    assert not broken, f"no collection or import error on blank starters: {broken[:5]}\n{output[-2000:]}"
    assert "graded: starter.py (your code)" in output, (
        f"the release grades the student's code by default:\n{output[-800:]}")
    results = json.loads((release / "results.json").read_text(encoding="utf-8"))
    assert results["score"] == 0 and results["tests"], (
        f"a clean 0: score {results['score']}, {len(results['tests'])} tests")
    not_stubs = [t["name"] for t in results["tests"] if "NotImplementedError" not in t.get("output", "")]
    assert not not_stubs, f"each graded test fails on its stub's NotImplementedError; these do not: {not_stubs[:5]}"
    graded_labs = {t["name"].split(" › ")[0] for t in results["tests"]}
    every_lab = {p.name for p in LABS_DIR.iterdir() if p.is_dir()}
    assert graded_labs == every_lab, f"every lab's tests ran, lab-02 and lab-07 too: missing {every_lab - graded_labs}"
    assert results["extra_data"]["commit"].startswith("release "), (
        f"a result graded in the release names the release it came from: {results['extra_data']['commit']}")


def test_release_checks_the_starters_against_the_recorded_api(release: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "pytest", "tests/test_starter_api.py", "-q", "-p", "no:xdist"],
                          cwd=release, env=student_env(), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"the shipped signature check passes on the blank starters:\n{done.stdout[-2000:]}"


def test_release_runs_the_students_code_by_default(release: Path) -> None:
    """No solution.py: the loader (so the notebooks, make serve and make demo) picks the starter."""
    probe = "import mini_vllm.labs as labs; print(labs.__file__); print(labs.chosen_impl('lab-02'))"
    done = subprocess.run([sys.executable, "-c", probe], cwd=release, env=student_env(), capture_output=True,
                          text=True, timeout=60)
    where, chosen = done.stdout.split()
    assert Path(where).is_relative_to(release) and chosen == "starter", (
        f"the release's own loader ({where}) must default to the starter, got {chosen!r}")


def test_every_command_the_release_documents_is_one_of_its_make_targets(release: Path, tmp_path: Path) -> None:
    """The instructor's printed-commands check, run over the release: its READMEs, notebooks and messages name
    only targets its own Makefile has (no make test, make mutants, make fixtures ...)."""
    checker = Path(__file__).with_name("test_commands.py")
    copy = tmp_path / "course"
    shutil.copytree(release, copy, ignore=shutil.ignore_patterns("build", "results.json", "__pycache__"))
    shutil.copy(checker, copy / "tests" / checker.name)
    done = subprocess.run([sys.executable, "-m", "pytest", f"tests/{checker.name}", "-q", "-p", "no:xdist",
                           "-k", "canonical"], cwd=copy, env=student_env(), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"commands in the release that it cannot run:\n{done.stdout[-2500:]}"


LAB = "phase-16-serving-apis-and-parsers/labs/lab-03-streaming-detokenizer"


@pytest.mark.parametrize(("path", "shipped"), [
    (f"{LAB}/starter.py", True), (f"{LAB}/test_lab.py", True), (f"{LAB}/README.md", True),
    (f"{LAB}/solution.py", False), (f"{LAB}/submission.py", False),  # a student's file dropped in to grade
    ("instructor/release.py", False), ("instructor/wrong_variants/lab_03/no_hold_back.py", False),
    ("bench/bench_lab05.py", False), ("tests/test_server.py", False), ("tests/test_starter_api.py", True),
    ("mini_vllm/testing/fixtures/api.json", True), ("TEACHING.md", False), (".ci/run", False),
], ids=lambda value: str(value).replace(LAB, "lab-03"))  # (a lab folder in an id would look like a lab run)
def test_what_ships(path: str, shipped: bool) -> None:
    assert ships(path) == shipped, f"{path} {'must' if shipped else 'must not'} ship"


# ------------------------------------------------------------------ the release's text holds in the release

BACKTICKED = re.compile(r"`([^`\s]+)`")
# Only the instructor's copy has these: a sentence naming them in the release points at nothing.
INSTRUCTOR_ONLY = re.compile(r"make bench\b|`bench/|\bbench\.\w+|instructor/|reference(?: solution)? by default")
# A time measured on the reference solutions (which the release does not have), e.g. "on the reference ... 9.6 s".
REFERENCE_FIGURE = re.compile(r"(?:reference|LAB_IMPL=solution)[^|\n]*\|?[^\n]*?\b\d+(?:\.\d+)? ?(?:s|ms|min)\b")


def release_texts(release: Path) -> dict[str, str]:
    """Every Markdown file of the release, and every notebook's markdown and code cells, by path."""
    texts = {}
    for path in sorted(release.rglob("*")):
        relative = path.relative_to(release)
        if ".git" in relative.parts or not path.is_file():
            continue
        if path.suffix == ".md":
            texts[str(relative)] = path.read_text(encoding="utf-8")
        elif path.suffix == ".ipynb":
            cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
            texts[str(relative)] = "\n".join("".join(cell["source"]) for cell in cells)
    return texts


def course_tops() -> set[str]:
    """The course's own top-level folders and files (this checkout's): a path starting with one is the course's,
    not an upstream project's (``vllm/v1/engine/detokenizer.py``) or a generated one (``build/``)."""
    from mini_vllm.labs import REPO_ROOT

    return {p.name for p in REPO_ROOT.iterdir() if not p.name.startswith(".")} - {"build"}


def missing_paths(release: Path, name: str, text: str) -> list[str]:
    """Backticked course paths of ``text`` (``tests/test_x.py``, ``instructor/dishonest/``) the release lacks."""
    from mini_vllm.labs import REPO_ROOT

    tops = course_tops()
    missing = []
    for token in BACKTICKED.findall(text):
        path = token.rstrip(".,:;)").split("::")[0]
        if "/" not in path or path.split("/")[0] not in tops:
            continue
        if not (REPO_ROOT / path.rstrip("/*")).parent.exists():
            continue  # an upstream project's path that starts like ours (vLLM's `tests/tokenizers_/...`)
        exists = any(release.glob(path.rstrip("/"))) if "*" in path else (release / path).exists()
        if not exists:
            missing.append(path)
    return missing


QUALIFIED = "instructor's copy"  # a paragraph that says where a thing lives holds in the release too


def paragraphs(text: str) -> list[str]:
    return re.split(r"\n\s*\n", text)


def text_problems(release: Path) -> list[str]:
    """Course paths the release lacks, and mentions of what only the instructor has, in paragraphs that do not
    say it lives in the instructor's copy."""
    problems = []
    for name, text in release_texts(release).items():
        for paragraph in paragraphs(text):
            if QUALIFIED in paragraph:
                continue
            problems += [f"{name}: `{token}` does not exist in the release" for token in
                         missing_paths(release, name, paragraph)]
            for pattern in (INSTRUCTOR_ONLY, REFERENCE_FIGURE):
                match = pattern.search(paragraph)
                if match:
                    problems.append(f"{name}: {match.group(0)[:100]!r}")
    return problems


@pytest.mark.slow
def test_every_path_command_and_figure_of_the_releases_text_holds_in_the_release(release: Path) -> None:
    problems = text_problems(release)
    assert not problems, ("the release's text names what it does not have (a course path, the benchmarks, "
                          "instructor/, a figure measured on the reference) without saying it is the "
                          f"{QUALIFIED}'s:\n  " + "\n  ".join(problems[:40]))


def test_the_release_names_no_file_it_leaves_out(release: Path) -> None:
    """grading.toml, the Makefile, every README and module: none points at TEACHING.md or CHANGELOG.md, which
    stay with the instructor (unless the paragraph says it is the instructor's copy that has them)."""
    named = []
    for path in sorted(release.rglob("*")):
        relative = path.relative_to(release)
        if ".git" in relative.parts or not path.is_file() or (
                path.suffix not in (".md", ".toml", ".py", ".ipynb", ".txt") and path.name != "Makefile"):
            continue
        for paragraph in paragraphs(path.read_text(encoding="utf-8")):
            if QUALIFIED not in paragraph:
                named += [f"{relative}: {left}" for left in sorted(LEFT_OUT_FILES) if left in paragraph]
    assert not named, f"the release names files it does not hold: {named}"


def test_the_text_checks_can_fail(tmp_path: Path) -> None:
    (tmp_path / "README.md").write_text("See `tests/test_release.py` and `docs/`. `make lab-08` on the "
                                        "reference: 9.6 s. Run `make bench`.\n\nIn the instructor's copy: "
                                        "`make bench`, `tests/test_release.py`.\n", encoding="utf-8")
    (tmp_path / "docs").mkdir()
    found = text_problems(tmp_path)
    assert len(found) == 3 and "tests/test_release.py" in found[0], found
    assert "make bench" in found[1] and "9.6 s" in found[2], found
    # notebook 09 said this in the release, where the starter is the default (the loader picks it: no solution.py)
    (tmp_path / "README.md").write_text("It runs whichever implementation `LAB_IMPL` selects: the reference "
                                        "solution by default, your own code with `LAB_IMPL=starter`.\n")
    assert [problem for problem in text_problems(tmp_path) if "by default" in problem], text_problems(tmp_path)
