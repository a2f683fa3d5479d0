"""Step-by-step stream tables for failure messages.

A streaming bug is a timing bug, so a failing test shows the whole timeline: for each
input, what went in, what the code under test produced and what it should have.
"""

from __future__ import annotations

from dataclasses import dataclass

FIRST_DIFFERENCE = "<-- first difference"
FIRST_WRONG_STEP = "first wrong step:"  # the scorecard quotes the line that starts with this


@dataclass(frozen=True)
class Step:
    """One row of a stream timeline."""

    label: str  # what went in: a token id, or "flush"
    raw: bytes | str  # the token's bytes, or the text chunk fed
    emitted: str
    expected: str


def quote(text: str) -> str:
    """Like ``repr`` for a string, but leaves emoji and other non-ASCII characters readable.

    (``repr`` escapes characters newer than Python's own Unicode tables, such as 🫨
    on Python 3.11, and the tables would then hide exactly what the test is about.)
    """
    escaped = "".join(repr(c)[1:-1] if c < " " or c in "\\'\x7f" else c for c in text)
    return f"'{escaped}'"


def format_trace(steps: list[Step], rule: str = "the stream differs from the expected one",
                 columns: tuple[str, str] = ("emitted", "expected")) -> str:
    """``rule`` (the sentence a scorecard shows), then the timeline with the first wrong step marked.

    ``expected`` must come from an oracle the student did not write.
    """
    first_bad = next((i for i, s in enumerate(steps) if s.emitted != s.expected), None)
    header = f"{'step':>4}  {'input':<8} {'raw':<18} {columns[0]:<24} {columns[1]}"
    lines = [rule, header]
    for i, step in enumerate(steps):
        raw = step.raw.hex(" ") if isinstance(step.raw, bytes) else quote(step.raw)
        marker = f"  {FIRST_DIFFERENCE}" if i == first_bad else ""
        lines.append(f"{i + 1:>4}  {step.label:<8} {raw:<18} {quote(step.emitted):<24} {quote(step.expected)}{marker}")
    if first_bad is not None:
        step = steps[first_bad]
        raw = step.raw.hex(" ") if isinstance(step.raw, bytes) else quote(step.raw)
        verdict = f" ({lag_or_leak(steps[: first_bad + 1])})" if columns == ("emitted", "expected") else ""
        lines.append(f"{FIRST_WRONG_STEP} {first_bad + 1} ({step.label} {raw}): {columns[0]} {quote(step.emitted)}, "
                     f"{columns[1]} {quote(step.expected)}{verdict}")
    return "\n".join(lines)


def lag_or_leak(steps: list[Step]) -> str:
    """What went wrong by the last of ``steps``, from everything shown so far: too late, too early, or wrong text.

    A stream can only be wrong in these three ways, and each points at a different
    mistake: holding back too much, letting out what should wait, or changing the text.
    """
    shown, due = "".join(s.emitted for s in steps), "".join(s.expected for s in steps)
    if due.startswith(shown):
        return f"too late: {quote(due[len(shown):])} should be out by now"
    if shown.startswith(due):
        return f"too early: {quote(shown[len(due):])} went out before the rule allows"
    return "wrong text: what was shown is not what the oracle shows"
