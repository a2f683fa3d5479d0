"""lab-01: per-character cost of the streaming tool-call parser as the reply grows.

A reply of prose, near-miss tags (`<today>`, `a < b`) and tool calls with CJK/emoji
arguments, fed in chunks of 1 and 16 characters.

- solution: the lab's StreamingToolParser over the whole stream;
- re-parse: runs the batch parser over the whole reply so far on every chunk, the way
  a parser that "just re-parses the current text" does. Timed on the last 100
  characters with the text before them already received (its cost at that length).
"""

from __future__ import annotations

import contextlib
import json
import time

from bench.common import Row, cost, print_table, save_plot
from mini_vllm.labs import load_lab

SIZES = (10_000, 100_000, 1_000_000)
CHUNK_SIZES = (1, 16)
REPARSE_WINDOW = 100
CALL = json.dumps({"name": "get_weather", "arguments": {"city": "東京", "note": "</tool_call> 🫨", "days": 3}},
                  ensure_ascii=False)
REPLY = f"Checking <today>'s weather, since a < b. <tool_call>\n{CALL}\n</tool_call> Done 🌦. "


class ReparseParser:
    """Re-parses everything received so far on every chunk."""

    def __init__(self, seen: str = "") -> None:
        self.lab = load_lab("lab-01")
        self.seen = seen

    def feed(self, delta: str) -> None:
        self.seen += delta
        with contextlib.suppress(self.lab.ToolCallParseError):  # a block still arriving: nothing to report
            self.lab.parse_tool_calls(self.seen)


def chunks_of(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def solution_us_per_char(text: str, size: int) -> float:
    lab = load_lab("lab-01")
    chunks = chunks_of(text, size)
    best = float("inf")
    for _ in range(3 if len(text) <= 100_000 else 1):
        parser = lab.StreamingToolParser()
        feed = parser.feed
        began = time.perf_counter()
        for chunk in chunks:
            feed(chunk)
        parser.finish()
        best = min(best, time.perf_counter() - began)
    return best / len(text) * 1e6


def reparse_us_per_char(text: str, size: int) -> float:
    parser = ReparseParser(seen=text[:-REPARSE_WINDOW])
    began = time.perf_counter()
    for chunk in chunks_of(text[-REPARSE_WINDOW:], size):
        parser.feed(chunk)
    return (time.perf_counter() - began) / REPARSE_WINDOW * 1e6


def main() -> list[str]:
    headlines = []
    for size in CHUNK_SIZES:
        rows = []
        for n in SIZES:
            text = REPLY * (n // len(REPLY))  # whole replies: a cut-off call would (rightly) be an error
            rows.append(Row("solution", n, solution_us_per_char(text, size)))
            rows.append(Row("re-parse everything", n, reparse_us_per_char(text, size)))
        print_table(f"lab-01 tool-call parser, {size}-character chunks", rows, "solution", "character")
        save_plot(f"lab01-chunk{size}", f"lab-01: cost per character, {size}-char chunks", rows, "character")
        growth = cost(rows, "solution", SIZES[-1]) / cost(rows, "solution", SIZES[0])
        headlines.append(
            f"lab-01 solution, {size}-char chunks, per-char cost 1M vs 10k: {growth:.2f}x (target <= 1.5x)"
        )
    return headlines


if __name__ == "__main__":
    print("\n".join(main()))
