"""lab-05: per-character cost of the stop-string checker as the text grows.

Ten stop strings; a text full of near misses (partial stops that never complete, so
the stream runs to the end); chunks of 1 and 16 characters.

- solution: the lab's StopStringChecker over the whole stream;
- re-scan: a checker that searches the whole text so far on every chunk. It is timed on
  the last 2,000 characters of each stream, with the text before them already fed
  (its cost at that length), so the 1M-character case finishes.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from bench.common import Row, cost, print_table, save_plot
from mini_vllm.labs import load_lab

SIZES = (10_000, 100_000, 1_000_000)
CHUNK_SIZES = (1, 16)
RESCAN_WINDOW = 2_000
STOPS = ["</answer>", "\nUser:", "STOP!", "<|im_end|>", "###", "Observation:", "🫨!", "END_OF_TEXT", "</s>", "Human:"]
TEXT = "The answer is <b>42</b> ## STOP? Human resources, Observation deck 🫨🫨 END_OF_TEX, User </ans 你好. "


class RescanChecker:
    """Searches the whole text on every chunk: correct, and O(text) per chunk."""

    def __init__(self, stops: Sequence[str], seen: str = "") -> None:
        self.stops, self.seen, self.shown = list(stops), seen, len(seen)

    def feed(self, chunk: str) -> str:
        self.seen += chunk
        hits = [(i + len(s), i) for s in self.stops if (i := self.seen.find(s)) != -1]
        cut = min(hits)[1] if hits else len(self.seen) - max(
            (k for s in self.stops for k in range(1, len(s)) if self.seen.endswith(s[:k])), default=0)
        new_text, self.shown = self.seen[self.shown : cut], max(self.shown, cut)
        return new_text


def chunks_of(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def solution_us_per_char(text: str, size: int) -> float:
    lab = load_lab("lab-05")
    chunks = chunks_of(text, size)
    best = float("inf")
    for _ in range(3 if len(text) <= 100_000 else 1):
        checker = lab.StopStringChecker(STOPS)
        feed = checker.feed
        began = time.perf_counter()
        for chunk in chunks:
            feed(chunk)
        checker.flush()
        best = min(best, time.perf_counter() - began)
    return best / len(text) * 1e6


def rescan_us_per_char(text: str, size: int) -> float:
    checker = RescanChecker(STOPS, seen=text[:-RESCAN_WINDOW])
    chunks = chunks_of(text[-RESCAN_WINDOW:], size)
    began = time.perf_counter()
    for chunk in chunks:
        checker.feed(chunk)
    return (time.perf_counter() - began) / RESCAN_WINDOW * 1e6


def main() -> list[str]:
    text = TEXT * (max(SIZES) // len(TEXT) + 1)
    headlines = []
    for size in CHUNK_SIZES:
        rows = []
        for n in SIZES:
            rows.append(Row("solution", n, solution_us_per_char(text[:n], size)))
            rows.append(Row("re-scan everything", n, rescan_us_per_char(text[:n], size)))
        print_table(f"lab-05 stop strings, {size}-character chunks, {len(STOPS)} stops", rows, "solution", "character")
        save_plot(f"lab05-chunk{size}", f"lab-05: cost per character, {size}-char chunks", rows, "character")
        growth = cost(rows, "solution", SIZES[-1]) / cost(rows, "solution", SIZES[0])
        headlines.append(
            f"lab-05 solution, {size}-char chunks, per-char cost 1M vs 10k: {growth:.2f}x (target <= 1.5x)"
        )
    return headlines


if __name__ == "__main__":
    print("\n".join(main()))
