"""The Gradescope autograder, simulated: ``make autograder``'s zip graded as Gradescope would grade it.

The zip is unpacked into a fresh ``/autograder``-shaped root (a new folder under
``build/autograder-roots/``, through ``AUTOGRADER_ROOT``), ``setup.sh`` runs once, and
``run_autograder`` grades several submissions shaped as students upload them (the course
folder, nested one folder deep, a zip). Each
``results.json`` must follow Gradescope's specification and hold the expected points:

- blank starters: a clean 0, every lab present;
- lab-03 done (its solution as its starter): lab-03's full points and nothing else;
- a syntax error in lab-05 and no lab-06 at all: 0 for those two only, each saying why, lab-03 still full;
- everything done: full marks (on labs 01-06: see EVERYTHING_DONE).

Setup installs nothing here: ``AUTOGRADER_EXISTING_VENV`` makes it use the course's own ``.venv``,
after checking it holds the locked versions (on Gradescope, setup.sh installs them). To stay
quick, some runs grade a few labs (``AUTOGRADER_LABS``, which a real grade never sets).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from instructor.autograder import local
from instructor.autograder.build import build
from mini_vllm.labs import LABS_DIR, REPO_ROOT, lab_number
from mini_vllm.testing.gradescope import validate
from mini_vllm.testing.policy import load_policy

LABS = sorted(p.name for p in LABS_DIR.iterdir() if p.is_dir() and p.name.startswith("lab-"))
IN_RELEASE = LABS_DIR.relative_to(REPO_ROOT)
SANDBOX_LANDED = (REPO_ROOT / "mini_vllm" / "sandbox").is_dir()
# The Gradescope simulation: in make check, not make test. One worker builds the root once and grades in it.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("autograder")]


def lab_folder(number: str) -> str:
    return next(lab for lab in LABS if lab_number(lab) == number)


@pytest.fixture(scope="module")
def autograder() -> Iterator[Path]:
    """A fresh /autograder: the zip unpacked into source/, run_autograder beside it, setup.sh run once."""
    scratch = local.scratch_dir("test-autograder-")
    try:
        zip_path = build(scratch / "autograder.zip")
        with zipfile.ZipFile(zip_path) as zipped:
            names = zipped.namelist()
        assert {"setup.sh", "run_autograder"} <= set(names), "Gradescope needs both scripts at the zip's root"
        assert not [n for n in names if n.startswith(("course/tests/", "course/bench/", "course/.venv"))], (
            "the autograder carries what grading needs, not the course's own tests, benchmarks or a venv")
        said = local.install(zip_path, scratch / "autograder")
        assert "installing nothing" in said, "the simulation says it reuses a venv instead of installing"
        yield scratch / "autograder"
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def release_copy(dest: Path, done: tuple[str, ...] = (), broken: dict[str, str] | None = None,
                 missing: tuple[str, ...] = ()) -> Path:
    """A student's copy of the release, as far as grading cares: each lab's starter.py at its path.

    ``done`` labs hold the reference solution as their starter; ``broken`` ones the given text.
    """
    broken = broken or {}
    for lab in LABS:
        number = lab_number(lab)
        if number in missing:
            continue
        source = "solution.py" if number in done else "starter.py"
        target = dest / IN_RELEASE / lab / "starter.py"
        target.parent.mkdir(parents=True, exist_ok=True)
        if number in broken:
            target.write_text(broken[number], encoding="utf-8")
        else:
            shutil.copyfile(LABS_DIR / lab / source, target)
        shutil.copyfile(LABS_DIR / lab / "README.md", target.parent / "README.md")
    (dest / "README.md").write_text("my copy of the course\n", encoding="utf-8")
    return dest


def run_autograder(root: Path, fill: Any, labs: str | None = None) -> dict[str, Any]:
    """Put a submission in place (``fill(submission_dir)``), run run_autograder, return its valid results."""
    submission = root / "submission"
    shutil.rmtree(submission, ignore_errors=True)
    submission.mkdir()
    fill(submission)
    stale = root / "results" / "results.json"
    stale.parent.mkdir(exist_ok=True)
    stale.write_text(json.dumps({"score": 999, "tests": []}), encoding="utf-8")  # a previous student's grade
    done = subprocess.run([str(root / "run_autograder")], env=local.grading_env(root, labs), capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, f"run_autograder failed:\n{done.stdout[-3000:]}{done.stderr[-3000:]}"
    results = json.loads(stale.read_text(encoding="utf-8"))
    validate(results)
    assert results["score"] != 999, "the stale results.json was not replaced"
    return results


def lab_scores(results: dict[str, Any]) -> dict[str, float]:
    return {lab: entry["score"] for lab, entry in results["extra_data"]["labs"].items()}


def points(number: str) -> float:
    return float(load_policy().lab(number).points)


def test_a_blank_submission_is_a_clean_zero_with_every_lab(autograder: Path) -> None:
    results = run_autograder(autograder, lambda sub: release_copy(sub))
    assert results["score"] == 0
    assert sorted(results["extra_data"]["labs"]) == [f"lab-{lab_number(lab)}" for lab in LABS], "every lab is graded"
    assert results["extra_data"]["max_score"] == sum(points(lab_number(lab)) for lab in LABS)
    assert {t["status"] for t in results["tests"]} == {"failed"}
    assert all("NotImplementedError" in t["output"] for t in results["tests"]), "blank starters fail cleanly"
    assert f"{len(LABS)} of {len(LABS)} labs found" in results["output"]
    extra = results["extra_data"]
    assert extra["commit"].startswith("autograder "), "a built copy names its build, not a checkout"
    assert extra["tests_version"] == load_policy().tests_version
    assert extra["autograder"]["status"] == "graded"
    assert all(entry["sha256"] for entry in extra["submission"].values()), "each graded file's hash is recorded"


def test_one_lab_done_earns_that_labs_points_only(autograder: Path) -> None:
    # Uploaded as the repository one folder deep, the way a downloaded zip of a repository unpacks.
    results = run_autograder(autograder, lambda sub: release_copy(sub / "phase16-mine", done=("03",)), labs="03,05,06")
    scores = lab_scores(results)
    assert scores.pop("lab-03") == points("03"), f"lab-03's full points: {results['output'][:1500]}"
    assert set(scores.values()) == {0}, f"no other lab earns anything: {scores}"
    assert results["score"] == points("03")
    found_at = results["extra_data"]["submission"]["lab-03"]["found_at"]
    assert found_at == f"phase16-mine/{IN_RELEASE}/{lab_folder('03')}/starter.py"


@pytest.mark.skipif(not SANDBOX_LANDED, reason="a lab that does not import costs only that lab once the sandbox "
                    "grades each lab in its own process (mini_vllm/sandbox, not merged yet)")
def test_a_broken_or_missing_lab_costs_that_lab_only(autograder: Path, tmp_path: Path) -> None:
    def zipped_copy(sub: Path) -> None:
        copy = release_copy(tmp_path / "copy", done=("03",), broken={"05": "def oops(:\n"}, missing=("06",))
        with zipfile.ZipFile(sub / "submission.zip", "w") as archive:
            for path in sorted(copy.rglob("*")):
                archive.write(path, path.relative_to(copy.parent))  # the zip holds the folder itself

    results = run_autograder(autograder, zipped_copy, labs="03,05,06")
    scores = lab_scores(results)
    assert scores == {"lab-03": points("03"), "lab-05": 0, "lab-06": 0}, results["output"][:3000]
    assert "SyntaxError" in results["output"], "the scorecard shows the lab's import error"
    looked_for = f"{IN_RELEASE}/{lab_folder('06')}/starter.py"
    assert f"Looked for {looked_for}" in results["output"], "a missing lab says what was looked for"
    assert results["extra_data"]["submission"]["lab-06"]["found_at"] is None


# lab-07 and lab-08 compose nothing and take the longest (a third of the whole grade each): their reference
# earning its full points through the sandbox is what the course contract checks (tests/test_course_contract.py).
EVERYTHING_DONE = [lab for lab in LABS if lab_number(lab) not in ("07", "08")]


def test_everything_done_earns_full_marks(autograder: Path) -> None:
    numbers = tuple(lab_number(lab) for lab in LABS)
    results = run_autograder(autograder, lambda sub: release_copy(sub, done=numbers),
                             labs=",".join(lab_number(lab) for lab in EVERYTHING_DONE))
    lost = [f"{t['name']}: {t['output'].splitlines()[0] if t['output'] else ''}" for t in results["tests"]
            if t["status"] != "passed"]
    assert not lost, "the reference, uploaded as a student's work, must pass every test:\n" + "\n".join(lost[:10])
    assert results["score"] == results["extra_data"]["max_score"] == sum(
        points(lab_number(lab)) for lab in EVERYTHING_DONE)


def test_the_graders_private_files_are_root_only(autograder: Path) -> None:
    course = autograder / "source" / "course"
    for private in [*(course / IN_RELEASE).glob("lab-*/solution.py"), course / "grading.toml",
                    course / "mini_vllm" / "testing"]:
        assert private.stat().st_mode & 0o077 == 0, f"{private} must be readable by root only (chmod go-rwx)"
    engine = course / "mini_vllm" / "engine.py"
    assert engine.stat().st_mode & 0o004, "the engine the student's code imports stays readable"


# ------------------------------------------------------------------ one Gradescope assignment per lab


def test_make_autograder_labs_08_is_an_assignment_of_its_own(tmp_path: Path) -> None:
    from instructor.autograder.build import chosen_labs, default_out

    labs = chosen_labs("08")
    assert labs == [lab_folder("08")] and default_out(labs).name == "autograder-lab-08.zip", (
        "LABS=08 builds its own zip: the all-labs build/autograder.zip stays")
    with zipfile.ZipFile(build(tmp_path / "autograder-lab-08.zip", labs)) as zipped:
        assert json.loads(zipped.read("course/assignment.json")) == {"labs": ["lab-08"]}
    with zipfile.ZipFile(build(tmp_path / "autograder.zip")) as zipped:
        assert "course/assignment.json" not in zipped.namelist(), "the all-labs zip grades every lab"


@pytest.fixture(scope="module")
def lab_03_autograder() -> Iterator[Path]:
    """`make autograder LABS=03`: an autograder for lab-03 alone, set up in a fresh root. (lab-03 rather than
    lab-08: its reference takes seconds, not a minute, and no call of it comes near the call budget.)"""
    from instructor.autograder.build import chosen_labs

    scratch = local.scratch_dir("test-autograder-03-")
    try:
        local.install(build(scratch / "autograder-lab-03.zip", chosen_labs("03")), scratch / "autograder")
        yield scratch / "autograder"
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


@pytest.mark.slow
def test_a_one_lab_autograder_grades_a_lone_starter_out_of_that_labs_points(lab_03_autograder: Path) -> None:
    lab = lab_folder("03")
    results = run_autograder(lab_03_autograder, lambda sub: shutil.copyfile(LABS_DIR / lab / "solution.py",
                                                                              sub / "starter.py"))
    assert results["score"] == results["extra_data"]["max_score"] == points("03"), results["output"][:2000]
    assert list(results["extra_data"]["labs"]) == ["lab-03"], "only the assignment's lab is graded"
    assert "not a whole grade" not in results["output"] and "1 of 1 labs found" in results["output"]
    assert results["extra_data"]["submission"]["lab-03"]["found_at"] == "starter.py"


@pytest.mark.slow
def test_a_one_lab_autograder_finds_the_labs_folder_uploaded_alone(lab_03_autograder: Path) -> None:
    lab = lab_folder("03")

    def lab_folder_only(sub: Path) -> None:
        (sub / lab).mkdir()
        shutil.copyfile(LABS_DIR / lab / "starter.py", sub / lab / "starter.py")
        shutil.copyfile(LABS_DIR / lab / "README.md", sub / lab / "README.md")

    results = run_autograder(lab_03_autograder, lab_folder_only)
    assert results["score"] == 0 and results["extra_data"]["max_score"] == points("03")
    assert results["extra_data"]["submission"]["lab-03"]["found_at"] == f"{lab}/starter.py"
    assert all("NotImplementedError" in t["output"] for t in results["tests"]), "graded: the blank starter's stubs"


# ------------------------------------------------------------------ what students upload


def test_a_zip_with_a_venv_and_git_is_found_and_they_are_not_unpacked(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from instructor.autograder import submission

    monkeypatch.setattr(submission, "MAX_UNZIPPED_BYTES", 2**20)  # the real limit, scaled down to keep this quick
    lab = lab_folder("03")
    upload, staging = tmp_path / "upload", tmp_path / "staging"
    upload.mkdir()
    with zipfile.ZipFile(upload / "mine.zip", "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(f"course/{IN_RELEASE}/{lab}/starter.py", "# my lab-03\n")
        for junk in (".venv/lib/python3.11/site-packages/torch.so", ".git/objects/pack/p.pack",
                     f"{IN_RELEASE}/{lab}/__pycache__/starter.pyc", ".hypothesis/examples/x", "node_modules/a.js"):
            archive.writestr(f"course/{junk}", b"\0" * 2**20)
    found = {f.lab: f for f in submission.locate(upload, staging)}
    assert found[lab].file is not None, f"the lab is found: {found[lab].problem}"
    assert found[lab].file.read_text() == "# my lab-03\n"
    assert not (staging / "unzipped" / "mine" / "course" / ".venv").exists(), "a .venv is never unpacked"


def test_a_zip_still_too_large_says_what_made_it_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from instructor.autograder import submission

    monkeypatch.setattr(submission, "MAX_UNZIPPED_BYTES", 2**20)
    lab = lab_folder("03")
    upload = tmp_path / "upload"
    upload.mkdir()
    with zipfile.ZipFile(upload / "mine.zip", "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(f"course/{IN_RELEASE}/{lab}/starter.py", "# my lab-03\n")
        archive.writestr("course/datasets/huge.bin", b"\0" * 3 * 2**20)
    found = {f.lab: f for f in submission.locate(upload, tmp_path / "staging")}
    problem = found[lab].problem
    assert found[lab].file is None
    assert "mine.zip was not unpacked" in problem and "course/datasets/ (3 MB" in problem, problem
    assert ".venv" in problem, f"it says what was already left out: {problem}"
    assert f"course/{IN_RELEASE.parts[0]}/ (0 MB, 1 file)" in problem, f"one file, in the student's words: {problem}"


def test_a_zip_with_too_many_files_names_the_folder_that_holds_them(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from instructor.autograder import submission

    monkeypatch.setattr(submission, "MAX_UNZIPPED_FILES", 50)  # the real limit, scaled down
    lab = lab_folder("03")
    upload = tmp_path / "upload"
    upload.mkdir()
    with zipfile.ZipFile(upload / "mine.zip", "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(f"course/{IN_RELEASE}/{lab}/starter.py", "# my lab-03\n")
        for folder in ("mini_vllm", "docs", "requirements"):  # the course's own folders: bigger, few files
            archive.writestr(f"course/{folder}/big.bin", b"\0" * 2**16)
        for index in range(60):
            archive.writestr(f"course/.tox/log{index}.txt", "x")
    problem = {f.lab: f for f in submission.locate(upload, tmp_path / "staging")}[lab].problem
    assert "Most files: course/.tox/ (0 MB, 60 files)" in problem, problem


# ------------------------------------------------------------------ a build that fails


def test_a_failed_build_leaves_no_zip_and_says_why(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    from instructor.autograder import build as build_module
    from mini_vllm.testing.policy import PolicyError

    out = tmp_path / "autograder.zip"
    out.write_bytes(b"last week's autograder")

    def broken_policy(path: Path) -> None:
        raise PolicyError("grading.toml: [labs.lab-03]: the task weights add up to 90, not the lab's 100 points")

    monkeypatch.setattr(build_module, "load_policy", broken_policy)
    assert build_module.main(["--out", str(out)]) == 1
    said = capsys.readouterr()
    assert "no autograder was built" in said.err and "add up to 90" in said.err
    assert "Traceback" not in said.err + said.out
    assert sorted(p.name for p in tmp_path.iterdir()) == [], "neither the stale zip nor a .partial is left"


def test_a_crashed_run_shows_no_output_that_names_hidden_tests(monkeypatch: pytest.MonkeyPatch) -> None:
    """A run that left no usable result shows the end of pytest's output, whose scorecard names every test with
    its hint: under a visibility rule that stays in the instructor's stdout."""
    from instructor.autograder import run
    from mini_vllm.testing import gradescope
    from mini_vllm.testing.policy import parse_policy

    def use(policy: Any) -> None:
        monkeypatch.setattr(run, "load_policy", lambda: policy, raising=False)  # (an older run.py has none)
        monkeypatch.setattr(gradescope, "load_policy", lambda: policy)

    printed = ("lab-05-stop-strings   30 / 100\n  task 2  the hold-back   0 / 55\n"
               "           first failure: test_hold_back\n           hint: SECRET-HOLD: held 'ab' after 'xab'\n")
    use(parse_policy({"tests_version": "t1", "stdout_visibility": "visible",
                      "visibility_rules": [{"tests": "lab-05 task 2 *", "visibility": "after_due_date"}]}))
    results = run.crashed_results("the grading run left no valid results", printed, [])
    validate(results)
    assert "SECRET-HOLD" not in results["output"] and "test_hold_back" not in results["output"], results["output"]
    assert "no valid results" in results["output"], "the student still reads why there is no grade"
    assert results["stdout_visibility"] == "after_due_date", "the stdout holding it shows no sooner than the tests"
    use(parse_policy({"tests_version": "t1"}))
    assert "SECRET-HOLD" in run.crashed_results("why", printed, [])["output"], "nothing hidden: the student sees it"


def test_the_autograders_own_limit_is_below_the_gradescope_timeout_teaching_recommends() -> None:
    import re

    from instructor.autograder import batch, run

    teaching = (REPO_ROOT / "TEACHING.md").read_text(encoding="utf-8")
    recommended = re.search(r"set the timeout to \*\*(\d+) minutes\*\*", teaching)
    assert recommended, "TEACHING.md recommends a Gradescope timeout, in minutes"
    gradescope_s = int(recommended.group(1)) * 60
    assert gradescope_s <= 40 * 60, "Gradescope allows at most 40 minutes"
    assert gradescope_s - 300 >= run.DEFAULT_TIMEOUT_S, (
        f"run_autograder stops at {run.DEFAULT_TIMEOUT_S} s: at least 5 minutes before Gradescope's {gradescope_s} s, "
        "so its own 0-point result is written before Gradescope cuts the run")
    assert batch.DEFAULT_TIMEOUT_S > run.DEFAULT_TIMEOUT_S, "grade-batch waits for the autograder's own result"
