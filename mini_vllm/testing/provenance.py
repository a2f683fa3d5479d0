"""What produced a grade: the course version and commit, the tests' version, file hashes, isolation.

Every ``results.json`` carries these (``extra_data``), so an instructor can tell, months later,
which tests graded which bytes, and two grades of the same file can be compared honestly.

A copy of the course without ``.git`` (the student release, the Gradescope autograder) carries
``build-info.json``, written when it was built from the instructor's repository
(:func:`write_build_info`); its commit is then ``release <id>`` or ``autograder <id>``.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from mini_vllm.labs import REPO_ROOT

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the same parser, from PyPI
    import tomli as tomllib

BUILD_INFO = "build-info.json"


def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def course_version(root: Path = REPO_ROOT) -> str:
    """``[project] version`` of the course's pyproject.toml (the file: installed metadata can be stale)."""
    try:
        return str(tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"])
    except (OSError, KeyError, tomllib.TOMLDecodeError):
        return "unknown"


def git_commit(root: Path = REPO_ROOT) -> str | None:
    """The checked-out commit, ``+dirty`` when tracked files differ from it; None outside a git checkout."""
    if not (root / ".git").exists():
        return None
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10)
        if head.returncode != 0:
            return None
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return head.stdout.strip() + ("+dirty" if dirty else "")


def read_build_info(root: Path = REPO_ROOT) -> dict[str, Any] | None:
    try:
        info = json.loads((root / BUILD_INFO).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return info if isinstance(info, dict) else None


def course_commit(root: Path = REPO_ROOT) -> str:
    """The instructor repository's commit, or ``<kind> <id>`` for a built copy (release, autograder)."""
    info = read_build_info(root)
    if info is not None:
        return f"{info.get('kind', 'build')} {info.get('id', 'unknown')}"
    return git_commit(root) or "unknown (no .git and no build-info.json)"


def write_build_info(dest: Path, kind: str, root: Path = REPO_ROOT) -> dict[str, Any]:
    """Stamp a built copy of the course (``kind``: ``release`` or ``autograder``) with where it came from.

    The id is the source commit's first 12 hex digits (``-dirty`` when built from uncommitted
    changes), so a release and the autograder built from the same commit share it. No date: the
    same commit builds the same bytes.
    """
    from mini_vllm.testing.policy import load_policy  # here, not at the top: policy imports nothing from here

    commit = git_commit(root)
    short = commit[:12] + ("-dirty" if commit.endswith("+dirty") else "") if commit else "unversioned"
    info = {
        "kind": kind,
        "id": short,
        "source_commit": commit,
        "course_version": course_version(root),
        "tests_version": load_policy(root / "grading.toml").tests_version,
    }
    (dest / BUILD_INFO).write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")
    return info


def file_record(path: Path) -> dict[str, str | None]:
    """Where a file is (relative to the course when inside it) and its sha256; None when it cannot be read."""
    try:
        shown = str(path.resolve().relative_to(REPO_ROOT))
    except ValueError:
        shown = str(path)
    try:
        digest: str | None = sha256_of(path)
    except OSError:
        digest = None
    return {"path": shown, "sha256": digest}


def walls() -> tuple[str, bool]:
    """How the code under test was kept apart from the grader, in words, and whether a grade counts under it.

    Both are stamped into every result (``extra_data.isolation``, ``extra_data.official``); the words
    say why a grade is not official (:mod:`mini_vllm.sandbox.isolation`).
    """
    if os.environ.get("LAB_SANDBOX") != "1":
        return "none: the code under test ran inside the grading process (LAB_SANDBOX is not 1)", False
    try:
        from mini_vllm.sandbox.isolation import probe

        found = probe()
        return found.describe(), found.official
    except Exception as error:  # a description must never cost a grade
        return f"unknown ({type(error).__name__}: {error})", False
