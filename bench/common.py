"""Shared benchmark plumbing: time a streaming method per token, print a table, save a plot.

Wall-clock numbers live only here, never in tests. Every figure is reported next to a
naive method and a real peer measured in the same run, so ratios carry the meaning.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

OUT_DIR = Path(__file__).resolve().parent.parent / "build" / "bench"

# A method gets the whole token stream and returns the seconds spent on `timed` tokens.
# Most time all tokens; a quadratic baseline times only a window at the end of the stream.
Method = Callable[[Sequence[int]], tuple[float, int]]


@dataclass(frozen=True)
class Row:
    method: str
    tokens: int
    us_per_token: float


def time_stream(
    run: Callable[[Sequence[int]], None], ids: Sequence[int], min_seconds: float = 0.3
) -> tuple[float, int]:
    """Best of several whole-stream runs (at least 3, and at least ``min_seconds`` in all)."""
    best, spent, rounds = float("inf"), 0.0, 0
    while rounds < 3 or spent < min_seconds:
        start = time.perf_counter()
        run(ids)
        elapsed = time.perf_counter() - start
        best, spent, rounds = min(best, elapsed), spent + elapsed, rounds + 1
    return best, len(ids)


def measure(methods: dict[str, Method], streams: dict[int, Sequence[int]]) -> list[Row]:
    rows = []
    for n, ids in streams.items():
        for name, method in methods.items():
            seconds, timed = method(ids)
            rows.append(Row(name, n, seconds / timed * 1e6))
    return rows


def cost(rows: list[Row], method: str, tokens: int) -> float:
    return next(r.us_per_token for r in rows if r.method == method and r.tokens == tokens)


def print_table(title: str, rows: list[Row], reference: str, unit: str = "token") -> None:
    """µs per ``unit`` for each method and stream length, with each method's ratio to ``reference``."""
    methods = list(dict.fromkeys(r.method for r in rows))
    sizes = sorted({r.tokens for r in rows})
    width = max(len(m) for m in methods) + 2
    print(f"\n{title}\n" + f"µs per {unit} (× = relative to {reference})")
    print(f"{unit}s".rjust(10) + "".join(m.rjust(width + 8) for m in methods))
    for n in sizes:
        base = cost(rows, reference, n)
        cells = [f"{cost(rows, m, n):8.2f} {cost(rows, m, n) / base:5.1f}×" for m in methods]
        print(f"{n:10d}" + "".join(c.rjust(width + 8) for c in cells))


def save_plot(name: str, title: str, rows: list[Row], unit: str = "token") -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    OUT_DIR.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for method in dict.fromkeys(r.method for r in rows):
        points = sorted((r.tokens, r.us_per_token) for r in rows if r.method == method)
        ax.loglog([n for n, _ in points], [us for _, us in points], "o-", label=method)
    ax.set(xlabel=f"{unit}s in the stream", ylabel=f"µs per {unit}", title=title)
    ax.legend()
    path = OUT_DIR / f"{name}.png"
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return path


# ------------------------------------------------------- text-stream labs (per-character cost)

Feeder = Callable[[str], object]


def chunks_of(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def stream_us_per_char(start: Callable[[], tuple[Feeder, Callable[[], object]]], text: str, size: int) -> float:
    """Best time to feed all of ``text`` in ``size``-character chunks, then finish; µs per character.

    ``start`` makes a fresh component and returns its (feed, finish) methods.
    """
    chunks = chunks_of(text, size)
    best = float("inf")
    for _ in range(3 if len(text) <= 100_000 else 1):
        feed, finish = start()
        began = time.perf_counter()
        for chunk in chunks:
            feed(chunk)
        finish()
        best = min(best, time.perf_counter() - began)
    return best / len(text) * 1e6


def tail_us_per_char(start_after: Callable[[str], Feeder], text: str, size: int, window: int) -> float:
    """A baseline whose cost grows with the text: given ``text[:-window]`` untimed, then timed on the rest."""
    feed = start_after(text[:-window])
    began = time.perf_counter()
    for chunk in chunks_of(text[-window:], size):
        feed(chunk)
    return (time.perf_counter() - began) / window * 1e6


def per_char_report(lab: str, title: str, sizes: Sequence[int], chunk_sizes: Sequence[int],
                    text_for: Callable[[int], str], methods: dict[str, Callable[[str, int], float]],
                    plot_stem: str | None = None) -> list[str]:
    """For each chunk size: a table and a plot over ``sizes``, and the solution's growth as a headline."""
    headlines = []
    for size in chunk_sizes:
        rows = [Row(name, n, measure_one(text_for(n), size)) for n in sizes for name, measure_one in methods.items()]
        print_table(f"{lab} {title}, {size}-character chunks", rows, "solution", "character")
        stem = plot_stem or lab.replace("-", "")
        save_plot(f"{stem}-chunk{size}", f"{lab}: cost per character, {size}-char chunks", rows,
                  "character")
        growth = cost(rows, "solution", sizes[-1]) / cost(rows, "solution", sizes[0])
        headlines.append(f"{lab} solution, {size}-char chunks, per-char cost {sizes[-1]:,} vs {sizes[0]:,} chars: "
                         f"{growth:.2f}x (target <= 1.5x)")
    return headlines
