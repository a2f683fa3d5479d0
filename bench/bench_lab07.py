"""lab-07: per-delta cost of the Responses formatter as one item grows to 1.2M characters.

One message item of 1.2M characters (ASCII, CJK and emoji: a str of 4-byte characters), sent
1 to 8 characters at a time as lab-02's StepOutputs, as the lab's cost test sends them:

- solution: the lab's ResponsesEventFormatter (whatever ``LAB_IMPL`` selects) over the whole item,
  each tenth of the deltas timed on its own, each tenth's best of ROUNDS runs; the headline is the
  last tenth's µs per delta against the first tenth's (the course's target: at most 1.5x);
- copies per delta: the named wrong variant (the item's text kept as one string, each delta added
  to it). Its first tenth is timed the same way; its last tenth on LATE_WINDOW deltas, with the
  90% before them already written (its cost at that length), so the run finishes.
"""

from __future__ import annotations

import importlib.util
import random
import time
from pathlib import Path
from typing import Any

from mini_vllm.labs import load_lab
from mini_vllm.testing.recorded import value_types

ITEM = 1_200_000
TENTHS = 10
ROUNDS = 3
LATE_WINDOW = 2_000  # the wrong variant's deltas timed in its last tenth
PATTERN = 'Il fait 18 °C à Paris, "clair". 東京は晴れ。🚀 {"k": [1]} \\ '
TARGET = 1.5
WRONG_VARIANT = Path(__file__).resolve().parents[1] / "instructor/wrong_variants/lab_07/copies_per_delta.py"

def deltas(n: int) -> list[str]:
    text = (PATTERN * (n // len(PATTERN) + 1))[:n]
    draw, pieces, start = random.Random(7), [], 0
    while start < len(text):
        size = draw.randint(1, 8)
        pieces.append(text[start : start + size])
        start += size
    return pieces


def formatter(code: Any) -> Any:
    return code.ResponsesEventFormatter("resp_bench", "mini-vllm", 1_700_000_000, input_tokens=7)


def tenth_seconds(code: Any, steps: list[Any]) -> list[float]:
    """Seconds spent on each tenth of ``steps`` (one item), in one run."""
    f, tenth, spent = formatter(code), len(steps) // TENTHS, []
    events = f.events
    for first in range(0, tenth * TENTHS, tenth):
        began = time.perf_counter()
        for step in steps[first : first + tenth]:
            events(step)
        spent.append(time.perf_counter() - began)
    f.close()
    return spent


def first_us(code: Any, steps: list[Any]) -> float:
    """µs per delta over ``steps``, the first deltas of a new item."""
    events = formatter(code).events
    began = time.perf_counter()
    for step in steps:
        events(step)
    return (time.perf_counter() - began) / len(steps) * 1e6


def late_us(code: Any, steps: list[Any], written: str) -> float:
    """µs per delta of LATE_WINDOW deltas written after ``written`` (the item so far, fed in one delta)."""
    step_output = value_types()[0]
    f = formatter(code)
    f.events(step_output(text=written))
    began = time.perf_counter()
    for step in steps[:LATE_WINDOW]:
        f.events(step)
    return (time.perf_counter() - began) / LATE_WINDOW * 1e6


def wrong_variant() -> Any:
    """The named wrong variant (instructor's copy only: bench/ does not ship to students either)."""
    spec = importlib.util.spec_from_file_location("lab07_copies_per_delta", WRONG_VARIANT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def report(name: str, first: float, last: float, rows: list[str]) -> float:
    rows.append(f"{name:<20}{first:>14.2f}{last:>14.2f}{last / first:>9.2f}x")
    return last / first


def main() -> list[str]:
    step_output = value_types()[0]
    pieces = deltas(ITEM)
    steps = [step_output(text=piece) for piece in pieces]
    tenth = len(steps) // TENTHS
    lab = load_lab("lab-07")
    rounds = [tenth_seconds(lab, steps) for _ in range(ROUNDS)]
    best = [min(times) / tenth * 1e6 for times in zip(*rounds, strict=True)]
    rows: list[str] = []
    growth = report("solution", best[0], best[-1], rows)
    variant = wrong_variant()
    first = min(first_us(variant, steps[:tenth]) for _ in range(ROUNDS))
    written = "".join(pieces[: len(pieces) - tenth])
    last = min(late_us(variant, steps[len(steps) - tenth :], written) for _ in range(ROUNDS))
    report("copies per delta", first, last, rows)
    print(f"\nlab-07 Responses formatter: one {ITEM:,}-character message item, {len(steps):,} deltas of 1-8 "
          f"characters (µs per delta, each tenth's best of {ROUNDS} runs)")
    print(f"{'method':<20}{'first tenth':>14}{'last tenth':>14}{'ratio':>10}")
    print("\n".join(rows))
    return [f"lab-07 Responses formatter, per-delta cost in the last tenth of a {ITEM:,}-character item vs the "
            f"first: {growth:.2f}x (target <= {TARGET}x)"]


if __name__ == "__main__":
    print("\n".join(main()))
