"""lab-01: per-character cost of the streaming tool-call parser as the reply grows.

A reply of prose, near-miss tags (`<today>`, `a < b`) and tool calls with CJK/emoji
arguments, fed in chunks of 1 and 16 characters.

- solution: the lab's StreamingToolParser over the whole stream;
- re-parse: runs the batch parser over the whole reply so far on every chunk, the way
  a parser that "just re-parses the current text" does. Timed on the last 100
  characters with the text before them already received (its cost at that length).

Then the same inside ONE call: a reply that is a single write_file call whose argument
is 20k / 320k / 1M characters (CJK, emoji, escaped quotes, braces), parsed with
stream_arguments=True, so every delta also streams an argument fragment. The cost per
character must stay flat: nothing re-joins or re-reads the open block.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable

from bench.common import Feeder, per_char_report, stream_us_per_char, tail_us_per_char
from mini_vllm.labs import load_lab

SIZES = (10_000, 100_000, 1_000_000)
LONG_CALL_SIZES = (20_000, 320_000, 1_000_000)
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


def long_call(size: int) -> str:
    """A reply holding one call whose argument value is about ``size`` characters long."""
    line = '旅行メモ 🚄 "day" {ok} \\ '
    value = (line * (size // len(line) + 1))[:size]
    arguments = json.dumps({"path": "notes.md", "content": value}, ensure_ascii=False)
    return 'Saving. <tool_call>{"name": "write_file", "arguments": ' + arguments + "}</tool_call> Saved."


def streaming_solution(text: str, size: int) -> float:
    lab = load_lab("lab-01")

    def start() -> tuple[Feeder, Callable[[], object]]:
        parser = lab.StreamingToolParser(stream_arguments=True)
        return parser.feed, parser.finish

    return stream_us_per_char(start, text, size)


def reparse(text: str, size: int) -> float:
    return tail_us_per_char(lambda seen: ReparseParser(seen).feed, text, size, REPARSE_WINDOW)


def main() -> list[str]:
    # Whole replies only: a reply cut inside a call would (rightly) be an error at finish.
    headlines = per_char_report("lab-01", "tool-call parser", SIZES, CHUNK_SIZES, lambda n: REPLY * (n // len(REPLY)),
                                {"solution": solution, "re-parse everything": reparse})
    inside = per_char_report("lab-01", "inside one call, arguments streamed", LONG_CALL_SIZES, CHUNK_SIZES, long_call,
                             {"solution": streaming_solution, "re-parse everything": reparse},
                             plot_stem="lab01-one-call")
    return headlines + [line.replace("lab-01 solution", "lab-01 solution inside one call") for line in inside]


if __name__ == "__main__":
    print("\n".join(main()))
