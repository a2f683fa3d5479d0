"""Every command the course prints or documents works verbatim in a fresh clone.

The course has two canonical forms: a ``make`` target (which builds ``.venv`` first), or
a program inside ``.venv/bin/``. A bare ``pytest`` or ``jupyter`` fails in a fresh clone
(``No module named 'mini_vllm'``), and ``LAB_IMPL=... pytest`` is how a student ends
up grading the wrong thing, so neither may appear anywhere: READMEs, docstrings, error
messages, notebook cells, the scorecard.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from pathlib import Path

import pytest

from mini_vllm.labs import LABS_DIR, REPO_ROOT

# A span of code that is a command: optional VAR=value words, then a program.
COMMAND = re.compile(r"^(?:[A-Z][A-Z0-9_]*=\S*\s+)*(make|pytest|jupyter|python3?|pip3?|\.venv/bin/\S+)(?:\s|$)")
# Non-canonical shapes wherever they stand, in or out of code spans.
NON_CANONICAL = [
    re.compile(r"LAB_IMPL(?:_\d\d)?=\S+\s+(?:pytest|jupyter|python)"),
    re.compile(r"(?<![/\w])pytest\s+phase-16"),
    re.compile(r"(?<![/\w])jupyter\s+(?:lab|notebook)"),
]
FENCE = re.compile(r"```[\w-]*\n(.*?)```", re.S)
INLINE = re.compile(r"`([^`\n]+)`")


def course_files() -> list[Path]:
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=REPO_ROOT, capture_output=True,
                            text=True, check=True).stdout.split()
    return [REPO_ROOT / f for f in listed if f.endswith((".md", ".py", ".ipynb"))
            and Path(f).name != Path(__file__).name and (REPO_ROOT / f).is_file()]


def texts(path: Path) -> list[str]:
    raw = path.read_text(encoding="utf-8")
    if path.suffix != ".ipynb":
        return [raw]
    cells = json.loads(raw)["cells"]
    return ["".join(cell["source"]) for cell in cells] + [
        "".join(out.get("text", "")) for cell in cells for out in cell.get("outputs", [])]


def code_spans(text: str) -> list[str]:
    fenced = [line.strip().removeprefix("$ ") for block in FENCE.findall(text) for line in block.splitlines()]
    spans = [span.split(" #")[0].strip() for span in fenced + INLINE.findall(FENCE.sub("", text))]  # no comments
    return [span for span in spans if span]


def make_targets() -> set[str]:
    makefile = (REPO_ROOT / "Makefile").read_text(encoding="utf-8")
    targets = set(re.findall(r"^([a-z][\w-]*):", makefile, re.M))
    if "lab-%:" in makefile:
        targets |= {f"lab-{p.name[4:6]}" for p in LABS_DIR.iterdir() if p.name.startswith("lab-")}
    return targets


def problem(command: str, targets: set[str]) -> str | None:
    """Why ``command`` would not work verbatim in a fresh clone, or None."""
    program = COMMAND.match(command)
    if program is None:
        return None
    if program.group(1) == "make":
        words = [w for w in shlex.split(command[program.end(1):]) if "=" not in w and not w.startswith("-")]
        unknown = [w for w in words if w not in targets]
        return f"no such make target {unknown}" if unknown else None
    if program.group(1).startswith(".venv/bin/"):
        return None
    return f"a bare `{program.group(1)}` fails in a fresh clone: use a make target or .venv/bin/{program.group(1)}"


def test_every_printed_command_is_canonical() -> None:
    targets = make_targets()
    found: list[str] = []
    for path in course_files():
        for text in texts(path):
            rel = path.relative_to(REPO_ROOT)
            found += [f"{rel}: `{span}`: {why}" for span in code_spans(text) if (why := problem(span, targets))]
            found += [f"{rel}: {m.group(0)!r}: not a canonical command" for rx in NON_CANONICAL
                      for m in rx.finditer(text)]
    assert not found, "commands that would not work verbatim in a fresh clone:\n" + "\n".join(found)


@pytest.mark.parametrize(("command", "verdict"), [
    ("make lab-03", None), ("LAB_IMPL=solution make lab-03", None), ("make grade", None),
    ("make lab-99", "no such make target"), ("pytest phase-16-serving-apis-and-parsers/labs", "bare"),
    ("LAB_IMPL=starter jupyter lab", "bare"), (".venv/bin/python -m mini_vllm serve", None),
    ("make serve TOKENIZER=byte", None), ("python -m mini_vllm serve", "bare"),
    ('make lab-05 ARGS="-k flush"', None),
])
def test_the_command_check_itself(command: str, verdict: str | None) -> None:
    why = problem(command, make_targets())
    assert (why is None) if verdict is None else (why is not None and verdict in why), (command, why)


def test_make_knows_every_documented_target() -> None:
    """`make -n` parses each target the course names: a dry run, nothing is installed or executed."""
    for target in sorted(make_targets()):
        done = subprocess.run(["make", "-n", target], cwd=REPO_ROOT, capture_output=True, text=True)
        assert "No rule to make target" not in done.stderr, f"make {target}: {done.stderr}"


def test_a_lab_run_that_selects_nothing_says_so() -> None:
    """`make lab-05 ARGS="-k <no such test>"`: not a grade, and make's last line says why."""
    done = subprocess.run(["make", "lab-05", "ARGS=-k no_test_is_called_this", "LAB_IMPL=solution"], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=300)
    said = done.stdout + done.stderr
    assert done.returncode != 0, f"a run that graded nothing must not pass:\n{said[-800:]}"
    assert "No graded test was selected" in said and "no test was selected (pytest exit 5)" in said, said[-800:]


def test_one_task_is_graded_with_task() -> None:
    """`make lab-05 TASK=1`: task 1's tests only, and the scorecard says it was a partial run."""
    done = subprocess.run(["make", "lab-05", "TASK=1", "LAB_IMPL=solution"], cwd=REPO_ROOT, capture_output=True,
                          text=True, timeout=300)
    said = done.stdout + done.stderr
    results = json.loads((REPO_ROOT / "build" / "results-lab-05.json").read_text(encoding="utf-8"))
    tasks = {t["name"].split(" › ")[1] for t in results["tests"]}
    assert done.returncode == 0 and tasks == {"task 1"}, f"TASK=1 grades task 1 only, got {sorted(tasks)}:\n{said}"
    assert "Partial run:" in said, f"the scorecard must say the run was not the whole grade:\n{said[-800:]}"


def test_a_usage_error_is_not_reported_as_a_failing_grade() -> None:
    """`-m "task(1)"` cannot pick a task: pytest refuses it (exit 4), and make says so, pointing at TASK."""
    done = subprocess.run(["make", "lab-05", "ARGS=-m 'task(1)'", "LAB_IMPL=solution"], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=300)
    said = done.stdout + done.stderr
    assert done.returncode != 0 and "usage error, exit 4" in said and "TASK=1" in said, said[-800:]
    assert "not everything passes yet" not in said, f"a usage error is not a failing grade:\n{said[-800:]}"
