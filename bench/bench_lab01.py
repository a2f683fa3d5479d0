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
from collections.abc import Callable

from bench.common import Feeder, per_char_report, stream_us_per_char, tail_us_per_char
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


def solution(text: str, size: int) -> float:
    lab = load_lab("lab-01")

    def start() -> tuple[Feeder, Callable[[], object]]:
        parser = lab.StreamingToolParser()
        return parser.feed, parser.finish

    return stream_us_per_char(start, text, size)


def reparse(text: str, size: int) -> float:
    return tail_us_per_char(lambda seen: ReparseParser(seen).feed, text, size, REPARSE_WINDOW)


def main() -> list[str]:
    # Whole replies only: a reply cut inside a call would (rightly) be an error at finish.
    return per_char_report("lab-01", "tool-call parser", SIZES, CHUNK_SIZES, lambda n: REPLY * (n // len(REPLY)),
                           {"solution": solution, "re-parse everything": reparse})


if __name__ == "__main__":
    print("\n".join(main()))
