"""lab-05: per-character cost of the stop-string checker as the text grows.

Ten stop strings; a text full of near misses (partial stops that never complete, so
the stream runs to the end); chunks of 1 and 16 characters.

- solution: the lab's StopStringChecker over the whole stream;
- re-scan: a checker that searches the whole text so far on every chunk. It is timed on
  the last 2,000 characters of each stream, with the text before them already fed
  (its cost at that length), so the 1M-character case finishes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from bench.common import Feeder, per_char_report, stream_us_per_char, tail_us_per_char
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


def solution(text: str, size: int) -> float:
    lab = load_lab("lab-05")

    def start() -> tuple[Feeder, Callable[[], object]]:
        checker = lab.StopStringChecker(STOPS)
        return checker.feed, checker.flush

    return stream_us_per_char(start, text, size)


def rescan(text: str, size: int) -> float:
    return tail_us_per_char(lambda seen: RescanChecker(STOPS, seen).feed, text, size, RESCAN_WINDOW)


def main() -> list[str]:
    text = TEXT * (max(SIZES) // len(TEXT) + 1)
    return per_char_report("lab-05", f"stop strings ({len(STOPS)} stops)", SIZES, CHUNK_SIZES, lambda n: text[:n],
                           {"solution": solution, "re-scan everything": rescan})


if __name__ == "__main__":
    print("\n".join(main()))
