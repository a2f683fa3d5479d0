"""Step-by-step stream tables for failure messages.

A streaming bug is a timing bug, so a failing test shows the timeline: for each call,
what went in, what the code under test produced and what an oracle says it should have.
Only a window around the first wrong step is printed (a one-character-at-a-time trace
would otherwise run to a screenful), and columns are aligned by the width a terminal
gives each character (CJK and emoji take two cells).

The "expected" column is the contract with the student: it comes from an oracle the
student did not write, never from their own output. A row with no oracle answer has
``expected=None``, and a table whose rows all lack one has no expected column at all.
``tests/test_course_contract.py`` checks this by grading an implementation whose every
output carries a marker, and requiring that the marker never lands in that column.
"""

from __future__ import annotations

import json
import os
import unicodedata
from dataclasses import dataclass

FIRST_DIFFERENCE = "<-- first difference"
FIRST_WRONG_STEP = "first wrong step:"  # the scorecard quotes the line that starts with this
ROWS_BEFORE, ROWS_AFTER = 4, 3  # the window printed around the first wrong step
# When set, every table is also appended to this file as a JSON line (the oracle contract check reads it).
TRACE_LOG_ENV = "COURSE_TRACE_LOG"


@dataclass(frozen=True)
class Step:
    """One row of a stream timeline."""

    label: str  # the call: "feed", "finish", "flush", or a token id
    raw: bytes | str  # what went in: the token's bytes, or the text chunk fed
    emitted: str  # what the code under test returned
    expected: str | None  # what the oracle says it must return (None: no oracle for this row)


def quote(text: str) -> str:
    """Like ``repr`` for a string, but leaves emoji and other non-ASCII characters readable.

    (``repr`` escapes characters newer than Python's own Unicode tables, such as 🫨
    on Python 3.11, and the tables would then hide exactly what the test is about.)
    """
    escaped = "".join(repr(c)[1:-1] if c < " " or c in "\\'\x7f" else c for c in text)
    return f"'{escaped}'"


def display_width(text: str) -> int:
    """Terminal cells ``text`` takes: wide (CJK, emoji) characters 2, combining marks 0, others 1."""
    return sum(0 if unicodedata.combining(c) else 2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def pad(text: str, width: int) -> str:
    """``text`` left-aligned in ``width`` terminal cells (``str.ljust`` counts characters, not cells)."""
    return text + " " * max(0, width - display_width(text))


def format_trace(steps: list[Step], rule: str = "the stream differs from the expected one",
                 columns: tuple[str, str] = ("emitted", "expected"), *, inputs: tuple[str, str] | None = None,
                 focus: int | None = None) -> str:
    """``rule`` (the sentence a scorecard shows), then the timeline with the first wrong step marked.

    ``columns`` name the output and oracle columns; ``inputs`` name the two input columns
    (by default ``token``/``bytes`` for byte rows, ``call``/``chunk`` for text rows).
    ``focus`` is the 0-based row to centre the window on when no row differs from the
    oracle (e.g. the step where a held-back assertion failed); by default the last row.
    """
    _log(steps, rule, columns)
    with_oracle = any(s.expected is not None for s in steps)
    first_bad = next((i for i, s in enumerate(steps) if s.expected is not None and s.emitted != s.expected), None)
    if inputs is None:
        inputs = ("token", "bytes") if any(isinstance(s.raw, bytes) for s in steps) else ("call", "chunk")
    centre = first_bad if first_bad is not None else (focus if focus is not None else len(steps) - 1)
    shown = range(max(0, centre - ROWS_BEFORE), min(len(steps), centre + ROWS_AFTER + 1))
    heading = ["step", inputs[0], inputs[1], columns[0]] + ([columns[1]] if with_oracle else [])
    rows = [[str(i + 1), steps[i].label, _raw(steps[i].raw), quote(steps[i].emitted)]
            + ([_expected(steps[i].expected)] if with_oracle else []) for i in shown]
    widths = [max(display_width(row[k]) for row in [heading, *rows]) for k in range(len(heading))]
    widths[0] = max(widths[0], 4)

    def line(cells: list[str]) -> str:  # the last cell unpadded: no trailing blanks
        return "  ".join([*(pad(c, w) for c, w in zip(cells[:-1], widths, strict=False)), cells[-1]])

    lines = [rule, line(heading)]
    if shown.start > 0:
        lines.append(f"… {shown.start} earlier rows omitted")
    for i, row in zip(shown, rows, strict=True):
        lines.append(line(row) + (f"  {FIRST_DIFFERENCE}" if i == first_bad else ""))
    if shown.stop < len(steps):
        lines.append(f"… {len(steps) - shown.stop} later rows omitted")
    if first_bad is not None:
        step = steps[first_bad]
        verdict = f" ({lag_or_leak(steps[: first_bad + 1])})" if columns == ("emitted", "expected") else ""
        lines.append(f"{FIRST_WRONG_STEP} {first_bad + 1} ({step.label} {_raw(step.raw)}): {columns[0]} "
                     f"{quote(step.emitted)}, {columns[1]} {_expected(step.expected)}{verdict}")
    return "\n".join(lines)


def _raw(raw: bytes | str) -> str:
    return (raw.hex(" ") or "-") if isinstance(raw, bytes) else quote(raw)


def _expected(expected: str | None) -> str:
    return "(no oracle)" if expected is None else quote(expected)


def lag_or_leak(steps: list[Step]) -> str:
    """What went wrong by the last of ``steps``, from everything shown so far: too late, too early, or wrong text.

    A stream can only be wrong in these three ways, and each points at a different
    mistake: holding back too much, letting out what should wait, or changing the text.
    """
    shown, due = "".join(s.emitted for s in steps), "".join(s.expected or "" for s in steps)
    if due.startswith(shown):
        return f"too late: {quote(due[len(shown):])} should be out by now"
    if shown.startswith(due):
        return f"too early: {quote(shown[len(due):])} went out before the rule allows"
    return "wrong text: what was shown is not what the oracle shows"


def _log(steps: list[Step], rule: str, columns: tuple[str, str]) -> None:
    """Append the whole table to ``$COURSE_TRACE_LOG`` when set (the oracle contract check)."""
    path = os.environ.get(TRACE_LOG_ENV)
    if path:
        record = {"rule": rule, "columns": list(columns), "emitted": [s.emitted for s in steps],
                  "expected": [s.expected for s in steps]}
        with open(path, "a", encoding="utf-8") as log:
            log.write(json.dumps(record) + "\n")  # ASCII: a NEL or U+2028 in a stream must not split the line
