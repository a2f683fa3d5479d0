"""``make autograder``: the Gradescope autograder zip, ``build/autograder.zip``.

At the zip's root, as Gradescope requires: ``setup.sh`` and ``run_autograder``. Beside them,
``course/``: the files of this repository the grader needs (the engine, the labs with their
tests, reference solutions and data, the policy, the lock file, the pytest configuration and the
autograder's own code), stamped with ``build-info.json`` (the commit it was built from). Notebooks,
benchmarks, the course's own tests and the rest of the instructor's tooling stay out.

Files are taken from the working tree as git lists them (tracked, plus new files not ignored), so
a build never picks up a virtual environment, caches or someone's scratch files.

``make autograder LABS=08`` (or ``LABS=03,05``) builds one Gradescope assignment for those labs:
``build/autograder-lab-08.zip``, whose ``course/assignment.json`` names them, so the grade is whole
out of their points. The policy is checked before anything is written, and a build that fails
leaves no zip behind (neither a stale one nor a half-written one).
"""

from __future__ import annotations

import argparse
import ast
import json
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from mini_vllm.labs import LABS_DIR, REPO_ROOT
from mini_vllm.testing.policy import PolicyError, load_policy
from mini_vllm.testing.provenance import BUILD_INFO, write_build_info

HERE = Path(__file__).resolve().parent
DEFAULT_OUT = REPO_ROOT / "build" / "autograder.zip"
# What the grader needs, as paths (or folders) relative to the repository root.
SHIPPED = (
    "pyproject.toml",
    "grading.toml",
    "conftest.py",
    "LICENSE",
    "requirements/",
    "mini_vllm/",
    "phase-16-serving-apis-and-parsers/labs/",
    "instructor/__init__.py",
    "instructor/autograder/",
)
# Never inside, even when listed above: the builders and the batch grader run on the instructor's machine.
LEFT_OUT = ("instructor/autograder/build.py", "instructor/autograder/batch.py", "instructor/autograder/metadata.py")
ZIP_ROOT_SCRIPTS = ("setup.sh", "run_autograder")
ASSIGNMENT = "assignment.json"  # in course/: the labs a one-lab (or few-lab) autograder grades


class BuildError(Exception):
    """Why no autograder was built, in a sentence (printed without a traceback)."""


def course_labs() -> list[str]:
    return sorted(p.name for p in LABS_DIR.iterdir() if p.is_dir() and p.name.startswith("lab-"))


def chosen_labs(labs: str | None) -> list[str]:
    """The lab folders of ``LABS=08`` or ``LABS=03,05`` (every lab when empty)."""
    every = course_labs()
    if not labs:
        return every
    chosen = []
    for number in labs.replace(",", " ").split():
        number = number.removeprefix("lab-").zfill(2)
        match = [lab for lab in every if lab[4:6] == number]
        if not match:
            raise BuildError(f"LABS={labs}: there is no lab-{number}; the labs are "
                             f"{', '.join(lab[:6] for lab in every)}")
        chosen += [lab for lab in match if lab not in chosen]
    return chosen


def default_out(labs: list[str]) -> Path:
    if labs == course_labs():
        return DEFAULT_OUT
    return DEFAULT_OUT.with_name("autograder-" + "-".join(["lab", *(lab[4:6] for lab in labs)]) + ".zip")


def check_policy(labs: list[str]) -> None:
    """grading.toml must parse and weigh exactly the tasks each lab's tests grade, or every run would fail."""
    try:
        policy = load_policy(REPO_ROOT / "grading.toml")
        for lab in labs:
            weights = policy.lab(lab).tasks
            if weights and set(weights) != _tasks(LABS_DIR / lab / "test_lab.py"):
                policy.task_weights(lab, dict.fromkeys(_tasks(LABS_DIR / lab / "test_lab.py"), 1))
    except PolicyError as error:
        raise BuildError(f"grading.toml: {error}".replace("grading.toml: grading.toml", "grading.toml")) from None


def _tasks(test_file: Path) -> set[int]:
    """The task numbers of a lab's ``TASKS`` dict, read without importing its tests."""
    for node in ast.parse(test_file.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "TASKS" for t in node.targets):
            return set(ast.literal_eval(node.value))
    return set()


def listed_files(root: Path = REPO_ROOT) -> list[str]:
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=root, capture_output=True,
                            check=True).stdout.decode().split("\0")
    return sorted(f for f in listed if f and (root / f).is_file() and _shipped(f))


def _shipped(path: str) -> bool:
    if path in LEFT_OUT or "/__pycache__/" in f"/{path}":
        return False
    return any(path == s or (s.endswith("/") and path.startswith(s)) for s in SHIPPED)


def build(out: Path = DEFAULT_OUT, labs: list[str] | None = None) -> Path:
    """Write the autograder zip for ``labs`` (default every lab) to ``out``; on any failure, no zip at all."""
    labs = labs or course_labs()
    partial = out.with_name(out.name + ".partial")
    out.unlink(missing_ok=True)  # a failed build must never leave an older zip to be uploaded by mistake
    partial.unlink(missing_ok=True)
    try:
        check_policy(labs)
        files = listed_files()
        out.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory() as scratch, zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as zipped:
            for script in ZIP_ROOT_SCRIPTS:
                _add(zipped, HERE / script, script, executable=True)
            for name in files:
                _add(zipped, REPO_ROOT / name, f"course/{name}",
                     executable=(REPO_ROOT / name).stat().st_mode & 0o111 != 0)
            write_build_info(Path(scratch), "autograder")
            _add(zipped, Path(scratch) / BUILD_INFO, f"course/{BUILD_INFO}")
            if labs != course_labs():
                (Path(scratch) / ASSIGNMENT).write_text(json.dumps({"labs": [lab[:6] for lab in labs]}) + "\n")
                _add(zipped, Path(scratch) / ASSIGNMENT, f"course/{ASSIGNMENT}")
        partial.replace(out)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    return out


def _add(zipped: zipfile.ZipFile, source: Path, name: str, executable: bool = False) -> None:
    info = zipfile.ZipInfo(name, date_time=(2026, 1, 1, 0, 0, 0))  # a fixed date: the same files, the same zip
    info.external_attr = (0o100755 if executable else 0o100644) << 16
    info.compress_type = zipfile.ZIP_DEFLATED
    zipped.writestr(info, source.read_bytes())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None, help="default: build/autograder.zip, or "
                        "build/autograder-lab-NN.zip for --labs")
    parser.add_argument("--labs", default="", help="one assignment for these labs only, e.g. 08 or 03,05")
    args = parser.parse_args(argv)
    try:
        labs = chosen_labs(args.labs)
        out = build(args.out or default_out(labs), labs)
    except (BuildError, subprocess.CalledProcessError, OSError) as error:
        print(f"make autograder: no autograder was built: {error}", file=sys.stderr)
        return 1
    with zipfile.ZipFile(out) as zipped:
        count = len(zipped.namelist())
    graded = "every lab" if labs == course_labs() else ", ".join(lab[:6] for lab in labs)
    points = sum(load_policy(REPO_ROOT / "grading.toml").lab(lab).points for lab in labs)
    print(f"{out.relative_to(REPO_ROOT) if out.is_relative_to(REPO_ROOT) else out}: {count} files, "
          f"{out.stat().st_size / 2**20:.1f} MiB; it grades {graded}, out of {float(points):g} points. Upload it as "
          "the assignment's autograder on Gradescope (Ubuntu 22.04 base image); TEACHING.md says how.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
