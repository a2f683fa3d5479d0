"""``make release DEST=dir``: the student's repository, built from this one (one commit, no history).

What ships: the engine (``mini_vllm``, its test kit and the recorded data), every lab's README,
starter and tests, the notebooks, the demo, the grading policy, and the few tests of ``tests/``
that make sense on a student's own code (:data:`SHIPPED_TESTS`). What does not: every
``solution.py``, this ``instructor/`` folder (wrong variants, mutation testing and its
equivalents, the canary, the correct-but-slow baselines, the fixtures' generator, these
builders), the instructor's tests, the benchmarks (they race correct-but-slow versions), CI, and the
git history.

Text meant for one copy only is marked in the instructor's files, so both copies are kept
from one source:

- Markdown: lines between ``<!-- instructor -->`` and ``<!-- /instructor -->`` are left out of
  the release, and so is a line that ends with ``<!-- instructor -->`` (a table row); lines
  between ``<!-- student`` and ``-->`` are hidden here and shown in the release.
- Makefile and grading.toml: lines between ``# >>> instructor`` and ``# <<< instructor`` are left out, and a
  line that starts with ``#> `` is a comment here and, without that prefix, a line of the release's.
- Each lab README loses what only the instructor's copy has: the ``solution.py`` row of its
  file table, the ``LAB_IMPL=solution`` and ``make mutants`` commands, and the paragraphs about the wrong
  variants and mutation testing (:func:`student_lab_readme`).

:func:`leaks` is the no-answers check: ``tests/test_release.py`` builds a release and requires
it to find nothing.
"""

from __future__ import annotations

import argparse
import gzip
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from mini_vllm.labs import LABS_DIR, REPO_ROOT
from mini_vllm.testing.provenance import BUILD_INFO, write_build_info

# Of tests/, only these ship: they pass on blank starters and check the engine or the student's API.
SHIPPED_TESTS = {"test_starter_api.py", "test_tokenizers.py", "test_real_tokenizers.py"}
# bench/ races each lab's code against correct-but-slow versions (a re-scanning stop checker, a re-splitting
# reasoning parser, a full re-decode): working answers, if slow ones, so it stays with the instructor.
LEFT_OUT_DIRS = ("instructor/", ".ci/", "bench/")
LEFT_OUT_FILES = {"TEACHING.md", "CHANGELOG.md"}  # the instructor's guide and the course kit's history
# The server's mask engine answers lab-08 task 2 and most of task 4 when pasted into the starter (38.5 of 100
# points, measured): the release's server asks the student's own TokenMasker and SplitMasker instead
# (lazy_masks.engine_present).
LEFT_OUT_FILES |= {"mini_vllm/server/mask_engine.py", "mini_vllm/server/stack_masks.py"}
WINDOW = 3  # a run of this many consecutive non-blank lines of a solution is a leak
# Runs a solution shares with shipped course code that are no part of an answer, each with its reason.
SHARED_NOT_ANSWERS: dict[tuple[str, ...], str] = {}
LAB_FILE = re.compile(r"^phase-16-serving-apis-and-parsers/labs/lab-\d\d-[\w-]+/[^/]+$")
LAB_README = re.compile(r"^phase-16-serving-apis-and-parsers/labs/lab-\d\d-[\w-]+/README\.md$")
# Paragraphs of a lab README about the instructor's checks, by how they open.
INSTRUCTOR_PARAGRAPHS = re.compile(r"^(?:Named wrong variants|How sharp these tests are|\*\*Mutation testing\.\*\*"
                                   r"|`make mutants)")
INSTRUCTOR_COMMANDS = re.compile(r"LAB_IMPL=solution make lab-\d\d|make mutants")  # lines of a lab README's commands
COMMIT_MESSAGE = "The course, as released to students"


def tracked_files(root: Path = REPO_ROOT) -> list[str]:
    """The repository's files (tracked, or new and not ignored), as paths relative to ``root``."""
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=root, capture_output=True,
                            check=True).stdout.decode("utf-8").split("\0")
    return sorted({f for f in listed if f and (root / f).is_file()})


def ships(path: str) -> bool:
    name = Path(path).name
    if name == "solution.py" or path in LEFT_OUT_FILES or path.startswith(LEFT_OUT_DIRS):
        return False
    if path.startswith("tests/"):
        return path.count("/") == 1 and name in SHIPPED_TESTS
    if LAB_FILE.match(path) and name.endswith(".py"):  # never a submission.py or canary left in a lab folder
        return name in ("starter.py", "test_lab.py")
    return True


def student_markdown(text: str) -> str:
    """The release's version of a Markdown file: instructor-only lines out, student-only lines in."""
    out: list[str] = []
    mode = "both"
    for line in text.split("\n"):
        marker = line.strip()
        if mode == "both" and marker == "<!-- instructor -->":
            mode = "instructor"
        elif mode == "instructor" and marker == "<!-- /instructor -->":
            mode = "both"
        elif mode == "both" and marker == "<!-- student":
            mode = "student"
        elif mode == "student" and marker == "-->":
            mode = "both"
        elif mode != "instructor" and not line.rstrip().endswith("<!-- instructor -->"):
            out.append(line)
    if mode != "both":
        raise ValueError(f"an unclosed <!-- {mode} --> block")
    return "\n".join(out)


def student_lab_readme(text: str) -> str:
    paragraphs = student_markdown(text).split("\n\n")
    kept = [p for p in paragraphs if not INSTRUCTOR_PARAGRAPHS.match(p.lstrip())]
    lines = [line for line in "\n\n".join(kept).split("\n")
             if not line.startswith("| `solution.py` |") and not INSTRUCTOR_COMMANDS.match(line)]
    text = "\n".join(lines)
    return re.sub(r" ?[`]LAB_IMPL=solution make lab-\d\d[`] runs the reference\.", "", text)


def student_commented(text: str, name: str) -> str:
    """A file commented with ``#`` (the Makefile, grading.toml) as the release has it: lines between
    ``# >>> instructor`` and ``# <<< instructor`` out, a line starting ``#> `` in without that prefix."""
    out: list[str] = []
    skipping = False
    for line in text.split("\n"):
        if line.startswith(("# >>> instructor", "# <<< instructor")):
            opening = line.startswith("# >>>")
            if opening == skipping:
                raise ValueError(f"{name}: {line!r} {'inside' if skipping else 'outside'} an instructor block")
            skipping = opening
        elif not skipping:
            out.append(line.removeprefix("#> "))
    if skipping:
        raise ValueError(f"{name}: an instructor block is never closed")
    return "\n".join(out)


def student_makefile(text: str) -> str:
    text = student_commented(text, "Makefile")
    defined = set(re.findall(r"^([a-z][\w-]*):", text, re.M))
    return re.sub(r"^\.PHONY:(.*)$", lambda m: ".PHONY: " + " ".join(t for t in m.group(1).split() if t in defined),
                  text, count=1, flags=re.M)


def student_version(path: str, content: bytes) -> bytes:
    if path == "Makefile":
        return student_makefile(content.decode("utf-8")).encode("utf-8")
    if path == "grading.toml":
        return student_commented(content.decode("utf-8"), path).encode("utf-8")
    if LAB_README.match(path):
        return student_lab_readme(content.decode("utf-8")).encode("utf-8")
    if path.endswith(".md"):
        return student_markdown(content.decode("utf-8")).encode("utf-8")
    return content


def build(dest: Path, root: Path = REPO_ROOT, commit: bool = True) -> list[str]:
    """Write the release into ``dest`` (new or empty) and commit it there once; the shipped paths."""
    if dest.exists() and any(dest.iterdir()):
        raise FileExistsError(f"{dest} is not empty: the release goes into a new folder")
    shipped = [path for path in tracked_files(root) if ships(path)]
    for path in shipped:
        target = dest / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(student_version(path, (root / path).read_bytes()))
        shutil.copymode(root / path, target)
    # Where this release came from (its commit is the student's own): every result it grades names it.
    write_build_info(dest, "release", root)
    shipped.append(BUILD_INFO)
    if commit:
        git = ["git", "-c", "user.name=Course release", "-c", "user.email=release@course.invalid",
               "-c", "commit.gpgsign=false"]
        env = {**os.environ, "GIT_AUTHOR_DATE": "2000-01-01T00:00:00Z", "GIT_COMMITTER_DATE": "2000-01-01T00:00:00Z"}
        for command in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", COMMIT_MESSAGE]):
            subprocess.run([*git, *command], cwd=dest, check=True, env=env, capture_output=True)
    return shipped


def _lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip()]


def _readable(path: Path) -> str | None:
    raw = path.read_bytes()
    if path.suffix == ".gz":
        raw = gzip.decompress(raw)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return None  # an image: no code in it


def leaks(release: Path) -> list[str]:
    """Every run of :data:`WINDOW` consecutive non-blank lines of a solution (lines its starter also has aside)
    found in a file of ``release``, as ``"lab: file: first line"``. Empty when nothing leaks."""
    windows: dict[tuple[str, ...], str] = {}
    for path in sorted(p for p in release.rglob("*") if p.is_file() and ".git" not in p.relative_to(release).parts):
        text = _readable(path)
        if text is not None:
            lines = _lines(text)
            for i in range(len(lines) - WINDOW + 1):
                windows.setdefault(tuple(lines[i : i + WINDOW]), str(path.relative_to(release)))
    found = []
    for solution in sorted(LABS_DIR.glob("lab-*/solution.py")):
        given = set(_lines((solution.parent / "starter.py").read_text(encoding="utf-8")))
        lines = _lines(solution.read_text(encoding="utf-8"))
        for i in range(len(lines) - WINDOW + 1):
            window = tuple(lines[i : i + WINDOW])
            if not given.intersection(window) and window in windows and window not in SHARED_NOT_ANSWERS:
                found.append(f"{solution.parent.name}: {windows[window]}: {window[0][:80]!r}")
    return found


def forbidden(release: Path) -> list[str]:
    """Files the release must not hold: solutions, the instructor's folder, wrong variants, mutation lists."""
    names = [str(p.relative_to(release)) for p in release.rglob("*") if ".git" not in p.relative_to(release).parts]
    return [n for n in names if Path(n).name in ("solution.py", "equivalent_mutants.txt")
            or n.startswith("instructor") or "wrong_variants" in n or "baselines" in n]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="make release", description="Build the student's repository.")
    parser.add_argument("dest", type=Path, help="a new (or empty) folder")
    args = parser.parse_args(argv)
    dest = args.dest.resolve()
    shipped = build(dest)
    problems = [f"leak: {x}" for x in leaks(dest)] + [f"must not ship: {x}" for x in forbidden(dest)]
    size = sum((dest / p).stat().st_size for p in shipped)
    print(f"{dest}: {len(shipped)} files, {size / 1e6:.1f} MB, one commit")
    for problem in problems:
        print(problem)
    if problems:
        print("the release above holds answers: do not hand it out")
        return 1
    print("no solution.py, no instructor files, and no run of "
          f"{WINDOW} lines of any solution in it. Students start with: make grade")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
