"""Dishonest: rewrites the course's loader, so a later grading loads something else."""

from pathlib import Path

import mini_vllm
from mini_vllm.labtypes import lab01 as _unused  # noqa: F401  (any course import works in the sandbox)

for target in ("labs.py", "testing/grading.py"):
    try:
        with open(Path(mini_vllm.__file__).resolve().parent / target, "a") as module:
            module.write("\nraise SystemExit('tampered')\n")
    except OSError:
        pass


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
