"""TEACHING.md's commands work as written, and the README stays a ten-minute read.

Every command TEACHING.md shows (in a code span or block) is read out of it and run: each ``make``
command as a dry run (``make -n``: the target exists, its variables parse, nothing is built), the
ones that build nothing slow for real, and each ``.venv/bin/python -m module`` must name a module
that exists. ``tests/test_commands.py`` checks they are canonical; this checks they do what the
guide says, so a renamed target or module fails here before an instructor types it.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shlex
import subprocess
import zipfile

import pytest

from mini_vllm.labs import REPO_ROOT

TEACHING = (REPO_ROOT / "TEACHING.md").read_text(encoding="utf-8")
README_WORDS = 3000  # about ten minutes of reading
# Placeholders the guide writes for the instructor to fill in, and what a dry run puts there.
PLACEHOLDERS = {"dir": "build/teaching-dir", "NN": "08", "../course-release": "build/teaching-release"}
# Commands cheap enough to run for real: what they must print.
RUN_FOR_REAL = {"make autograder LABS=08": "it grades lab-08, out of 100 points",
                "LAB_IMPL=solution make lab-03": "graded: solution.py"}
# A dry run of a grading target stops at make's verdict on the run's status, which a dry run never writes.
VERDICT = re.compile(r"the scorecard above says where to start\.  Stop\.\s*$")


FENCE = re.compile(r"```[\w-]*\n(.*?)```", re.S)
INLINE = re.compile(r"`([^`\n]+)`")


def code_spans(text: str) -> list[str]:
    """Each code span and each line of a code block, without a trailing comment (as tests/test_commands.py reads)."""
    fenced = [line.strip().removeprefix("$ ") for block in FENCE.findall(text) for line in block.splitlines()]
    spans = [span.split(" #")[0].strip() for span in fenced + INLINE.findall(FENCE.sub("", text))]
    return [span for span in spans if span]


def teaching_commands(program: str) -> list[str]:
    """The guide's commands that start with ``program`` (after any VAR=value words), in order, once each."""
    found = []
    for span in code_spans(TEACHING):
        words = span.split()
        first = next((w for w in words if "=" not in w), "")
        if first == program and span not in found:
            found.append(span)
    return found


def filled(command: str) -> list[str]:
    return [PLACEHOLDERS.get(w, w) if "=" not in w else "=".join([w.split("=", 1)[0],
            PLACEHOLDERS.get(w.split("=", 1)[1], w.split("=", 1)[1])]) for w in shlex.split(command)]


def test_the_guide_shows_the_commands_of_a_term() -> None:
    made = teaching_commands("make")
    for command in ("make autograder LABS=08", "make grade-batch SUBMISSIONS=dir LABS=08", "make release DEST=dir",
                    "make check"):
        assert any(c.startswith(command.split(" DEST=")[0]) for c in made), f"TEACHING.md shows `{command}`"
    assert len(made) >= 10, made


@pytest.mark.parametrize("command", teaching_commands("make"))
def test_each_make_command_of_the_guide_runs(command: str) -> None:
    """A dry run: make knows the target and parses the line as the guide writes it."""
    words = filled(command)
    at = words.index("make")
    before = dict(word.split("=", 1) for word in words[:at])  # LAB_IMPL=solution make ...: the environment's
    done = subprocess.run(["make", "-n", *words[at + 1:]], cwd=REPO_ROOT, capture_output=True, text=True,
                          timeout=120, env={**_environ(), **before})
    said = done.stdout + done.stderr
    assert "No rule to make target" not in said, f"`{command}`:\n{said[-800:]}"
    assert done.returncode == 0 or VERDICT.search(done.stderr), f"`{command}`:\n{said[-800:]}"


@pytest.mark.slow  # a zip built and a lab graded: make check, not make test's three minutes
@pytest.mark.parametrize("command", sorted(RUN_FOR_REAL))
def test_the_commands_that_build_a_zip_run_for_real(command: str) -> None:
    assert command in teaching_commands("make"), f"TEACHING.md no longer shows `{command}`"
    words = shlex.split(command)
    at = words.index("make")
    done = subprocess.run(words[at:], cwd=REPO_ROOT, capture_output=True, text=True, timeout=300,
                          env={**_environ(), **dict(word.split("=", 1) for word in words[:at])})
    said = done.stdout + done.stderr
    assert done.returncode == 0 and RUN_FOR_REAL[command] in said, said[-800:]
    zipped = re.search(r"(build/autograder-lab-08\.zip)", said)
    if "autograder" in command:
        assert zipped, said
        with zipfile.ZipFile(REPO_ROOT / zipped.group(1)) as archive:
            assert "course/assignment.json" in archive.namelist(), "a per-lab zip names its lab"


def test_each_python_module_the_guide_runs_exists() -> None:
    commands = teaching_commands(".venv/bin/python")
    assert commands, "TEACHING.md runs the timing bench with .venv/bin/python -m ..."
    for command in commands:
        words = shlex.split(command)
        module = words[words.index("-m") + 1]
        assert importlib.util.find_spec(module) is not None, f"`{command}`: no module {module}"


def test_the_readme_is_read_in_ten_minutes() -> None:
    words = len((REPO_ROOT / "README.md").read_text(encoding="utf-8").split())
    assert words <= README_WORDS, (f"README.md has {words} words, over {README_WORDS} (about ten minutes): move "
                                   "what an instructor needs to TEACHING.md, and what explains the grader to docs/")


def _environ() -> dict[str, str]:
    """This run's environment without what pytest or a lab choice put there (the guide's commands are typed)."""
    return {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "LAB_", "MAKEFLAGS", "MFLAGS"))}
