"""Dishonest: writes a perfect results file where the grader writes, then ends the process."""

import json
import os
from pathlib import Path

from mini_vllm.labtypes import lab01 as _unused  # noqa: F401  (any course import works in the sandbox)

for folder in (Path.cwd(), Path(__file__).resolve().parents[3], Path("/autograder/results")):
    try:
        (folder / "results.json").write_text(json.dumps({"score": 708, "max_score": 708, "tests": []}))
    except OSError:
        pass
os._exit(0)


def utf8_expected_len(lead_byte: int) -> int:
    raise NotImplementedError("lab-03 task 1: implement utf8_expected_len")


class StreamingDetokenizer:
    def __init__(self, tokenizer):
        self.tokenizer = tokenizer

    def feed(self, token_id: int) -> str:
        raise NotImplementedError("lab-03 task 2: implement StreamingDetokenizer.feed")

    def flush(self) -> str:
        raise NotImplementedError("lab-03 task 3: implement StreamingDetokenizer.flush")

    @property
    def held_bytes(self) -> bytes:
        raise NotImplementedError("lab-03 task 2: implement StreamingDetokenizer.held_bytes")
