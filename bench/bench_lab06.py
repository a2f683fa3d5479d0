"""lab-06: per-character cost of the reasoning parser as the reply grows.

A reply of `<think>`, half of it thought and half answer, full of near misses (`</thi`,
`<tool`, `</b>`, `<thinking`) so the hold-back is exercised all the time; chunks of 1 and
16 characters.

- solution: the lab's StreamingReasoningParser over the whole stream. Every size is fed
  at least a million characters in all (100 runs of the 10k reply, 10 of the 100k, 3 of
  the 1M) and the *median* run is reported: a 10k run lasts a few milliseconds, and on a
  shared machine the best of three such runs is a lucky quiet moment, not a cost;
- re-split everything: a parser that keeps the reply and runs the batch ``split_reasoning``
  on all of it for every chunk (what a parser built on ``current_text`` does). It is timed
  on the last 2,000 characters of each stream, with the text before them already fed
  (its cost at that length), so the 1M-character case finishes.
"""

from __future__ import annotations

import statistics
import time

from bench.common import chunks_of, per_char_report, tail_us_per_char
from mini_vllm.labs import load_lab

SIZES = (10_000, 100_000, 1_000_000)
CHUNK_SIZES = (1, 16)
RESPLIT_WINDOW = 2_000
THOUGHT = "Let me see: </thi is not the end, <tool is not a call, a </b> and <thinking> are text, 你好 🫨. "
ANSWER = "The answer </th is still the answer, <think> is text here, 东京 🚀 and </b>. "


def reply(n: int) -> str:
    """A reply of exactly ``n`` characters: the opening, a thought, the end tag, then the answer."""
    head = "<think>\n" + (THOUGHT * (n // 2 // len(THOUGHT) + 1))[: n // 2] + "</think>\n\n"
    return head + (ANSWER * (n // len(ANSWER) + 1))[: n - len(head)]


class ResplitParser:
    """Keeps the whole reply and splits all of it again on every chunk: correct, O(reply) per chunk."""

    def __init__(self, seen: str = "") -> None:
        self.lab = load_lab("lab-06")
        self.seen = seen
        self.shown = ("", "")

    def feed(self, chunk: str) -> tuple[str, str]:
        self.seen += chunk
        reasoning, content = self.lab.split_reasoning(self.seen)
        # Keep back a possible partial tag at the end, as a streaming parser must.
        tail = max((k for tag in ("</think>", "<tool_call>") for k in range(1, len(tag))
                    if self.seen.endswith(tag[:k])), default=0)
        if content:
            content = content[: len(content) - tail]
        else:
            reasoning = reasoning[: len(reasoning) - tail]
        new = (reasoning[len(self.shown[0]) :], content[len(self.shown[1]) :])
        self.shown = (reasoning, content)
        return new


def solution(text: str, size: int) -> float:
    lab = load_lab("lab-06")
    chunks = chunks_of(text, size)
    runs = []
    for _ in range(max(3, 1_000_000 // len(text))):
        parser = lab.StreamingReasoningParser()
        began = time.perf_counter()
        for chunk in chunks:
            parser.feed(chunk)
        parser.finish()
        runs.append(time.perf_counter() - began)
    return statistics.median(runs) / len(text) * 1e6


def resplit(text: str, size: int) -> float:
    return tail_us_per_char(lambda seen: ResplitParser(seen).feed, text, size, RESPLIT_WINDOW)


def main() -> list[str]:
    return per_char_report("lab-06", "reasoning parser (<think> … </think> answer)", SIZES, CHUNK_SIZES, reply,
                           {"solution": solution, "re-split everything": resplit})


if __name__ == "__main__":
    print("\n".join(main()))
