"""Step-by-step stream tables for failure messages.

A streaming bug is a timing bug, so a failing test shows the whole timeline: for each
token, its bytes, what the code under test emitted and what it should have emitted.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Step:
    """One row of a stream timeline."""

    label: str  # what went in: a token id, or "flush"
    raw: bytes | str  # the token's bytes, or the text chunk fed
    emitted: str
    expected: str


def format_trace(steps: list[Step], title: str = "stream, step by step") -> str:
    """A fixed-width table of ``steps``, with the first disagreeing row marked."""
    first_bad = next((i for i, s in enumerate(steps) if s.emitted != s.expected), None)
    header = f"{'step':>4}  {'input':<14} {'raw':<22} {'emitted':<20} expected"
    lines = [title + ":", header]
    for i, step in enumerate(steps):
        raw = step.raw.hex(" ") if isinstance(step.raw, bytes) else repr(step.raw)
        marker = "  <-- first difference" if i == first_bad else ""
        lines.append(f"{i + 1:>4}  {step.label:<14} {raw:<22} {step.emitted!r:<20} {step.expected!r}{marker}")
    return "\n".join(lines)
