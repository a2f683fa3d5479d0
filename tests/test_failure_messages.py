"""Failures that teach: every assertion in a graded test says, in the lesson's terms, what broke.

A bare ``assert got == expected`` shows a student two values and no rule. So in each lab's
``test_lab.py``, every ``assert`` inside a graded test (``@pytest.mark.task``) or a helper
it calls must carry a message. Parametrize ids must stay short, since pytest prints one
per failing case.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from mini_vllm.labs import LABS_DIR
from mini_vllm.testing.expect import hold_problem
from mini_vllm.testing.grading import failure_hint
from mini_vllm.testing.trace import FIRST_DIFFERENCE, FIRST_WRONG_STEP, Step, display_width, format_trace, quote

TEST_FILES = sorted(LABS_DIR.glob("lab-*/test_lab.py"))
MAX_ID = 40  # characters in one parametrize id


def is_control(function: ast.FunctionDef) -> bool:
    return any("control" in ast.unparse(decorator) for decorator in function.decorator_list)


def bare_asserts(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    functions = [node for node in tree.body if isinstance(node, ast.FunctionDef) and not is_control(node)]
    return [f"line {node.lineno}: {ast.unparse(node.test)[:80]}" for function in functions
            for node in ast.walk(function) if isinstance(node, ast.Assert) and node.msg is None]


def has_own_id(value: ast.expr) -> bool:
    """``pytest.param(..., id="short")``."""
    return isinstance(value, ast.Call) and any(k.arg == "id" for k in value.keywords)


def long_ids(path: Path) -> list[str]:
    """Literal parametrize values without ``ids=`` whose printed id would be long."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call) and ast.unparse(node.func).endswith("parametrize") and len(node.args) > 1:
            if any(k.arg == "ids" for k in node.keywords) or not isinstance(node.args[1], (ast.List, ast.Tuple)):
                continue
            found += [f"line {v.lineno}: {ast.unparse(v)[:60]}" for v in node.args[1].elts
                      if len(ast.unparse(v)) > MAX_ID and not has_own_id(v)]
    return found


LAB_IDS = [p.parent.name for p in TEST_FILES]


@pytest.mark.parametrize("path", TEST_FILES, ids=LAB_IDS)
def test_every_assertion_says_which_rule_broke(path: Path) -> None:
    bare = bare_asserts(path)
    assert not bare, f"{path.parent.name}: assertions without a message:\n" + "\n".join(bare)


@pytest.mark.parametrize("path", TEST_FILES, ids=LAB_IDS)
def test_parametrize_ids_are_short(path: Path) -> None:
    long = long_ids(path)
    assert not long, f"{path.parent.name}: give these parameters short ids (ids=...):\n" + "\n".join(long)


@pytest.mark.parametrize(("emitted", "expected", "verdict"), [
    (["", "ab"], ["a", "b"], "too late: 'a' should be out by now"),
    (["ab", ""], ["a", "b"], "too early: 'b' went out before the rule allows"),
    (["a", "x"], ["a", "b"], "wrong text"),
], ids=["late", "early", "wrong"])
def test_first_wrong_step_says_how_the_stream_went_wrong(emitted: list[str], expected: list[str],
                                                         verdict: str) -> None:
    """The scorecard quotes the "first wrong step" line, so it must say late, early or wrong by itself."""
    steps = [Step("feed", e, got, want) for e, got, want in zip(expected, emitted, expected, strict=True)]
    last_line = format_trace(steps, "rule").splitlines()[-1]
    assert last_line.startswith(FIRST_WRONG_STEP) and verdict in last_line, last_line


def test_a_long_trace_shows_a_window_around_the_first_wrong_step() -> None:
    """A reply fed one character at a time: the table shows the rows near the mistake, not all 61."""
    text = "<think>" + "x" * 40 + "</think>answer!"
    steps = [Step("feed", c, "" if i == 30 else c, c) for i, c in enumerate(text)]
    table = format_trace(steps, "rule").splitlines()
    rows = [line for line in table if line[:1].isdigit()]
    assert len(rows) <= 10 and any(FIRST_DIFFERENCE in row for row in rows), "\n".join(table)
    assert "… 26 earlier rows omitted" in table and any(line.endswith("later rows omitted") for line in table), (
        "the table must say how many rows it left out\n" + "\n".join(table))
    assert table[-1].startswith(f"{FIRST_WRONG_STEP} 31 "), table[-1]


def test_columns_are_named_for_what_they_hold() -> None:
    text_rows = format_trace([Step("feed", "ab", "a", "ab"), Step("finish", "", "b", "")], "rule").splitlines()
    assert text_rows[1].split() == ["step", "call", "chunk", "emitted", "expected"], text_rows[1]
    byte_rows = format_trace([Step("104", b"h", "h", "h")], "rule").splitlines()
    assert byte_rows[1].split() == ["step", "token", "bytes", "emitted", "expected"], byte_rows[1]


def test_columns_align_by_display_width() -> None:
    """CJK and emoji take two terminal cells: the next column must still start at the same cell."""
    steps = [Step("feed", "服务器", "服务器", "服务器"), Step("feed", "ab", "ab", "ab"), Step("feed", "🫨", "", "🫨")]
    rows = [line for line in format_trace(steps, "rule").splitlines() if line[:1].isdigit()]
    starts = {display_width(row[: row.index("feed") + 4]) for row in rows}
    emitted_starts = set()
    for row, step in zip(rows, steps, strict=True):
        before = row[: row.index(quote(step.raw)) + len(quote(step.raw))]
        emitted_starts.add(display_width(before) + len(row[len(before):]) - len(row[len(before):].lstrip(" ")))
    assert len(starts) == 1 and len(emitted_starts) == 1, "\n".join(rows)


def test_rows_without_an_oracle_have_no_expected_column() -> None:
    table = format_trace([Step("feed", "a", "b", None)], "rule", ("shown", "")).splitlines()
    assert table[1].split() == ["step", "call", "chunk", "shown"] and FIRST_WRONG_STEP not in table[-1], table


@pytest.mark.parametrize(("held", "must", "says"), [
    ("", "<tool", "you hold only ''"),  # holds too little: the backwards message, the right way round
    ("x <tool", "<tool", "show the rest now"),  # holds too much
    ("<t", "", "nothing can still become a tag"),  # holds a false alarm
], ids=["too-little", "too-much", "false-alarm"])
def test_a_wrong_hold_says_which_way_it_is_wrong(held: str, must: str, says: str) -> None:
    message = hold_problem("<think>x <tool", held, must, "a tag")
    assert says in message and message.startswith("after "), message


@pytest.mark.parametrize(("last_line", "at"), [
    (f"{FIRST_WRONG_STEP} 31 (feed 'x'): emitted '', expected 'x'", "step 31 (feed 'x'): emitted '', expected 'x'"),
    (f"{FIRST_WRONG_STEP} event 70 (response.output_text.delta): expected content_index 0",
     "event 70 (response.output_text.delta): expected content_index 0"),
], ids=["trace", "event-table"])
def test_the_scorecard_quotes_where_the_stream_went_wrong(last_line: str, at: str) -> None:
    """The scorecard's "at:" line: a trace's step number, or an event table's event, never "step event 70"."""
    hint = failure_hint(f"AssertionError: the rule\nthe table\n{last_line}", "lab-07", 1)
    assert hint == ["the rule", at], hint
