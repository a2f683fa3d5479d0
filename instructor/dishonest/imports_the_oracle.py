"""Dishonest: imports the test module's own oracle and answers with it at run time."""

import importlib.util
from pathlib import Path

import mini_vllm
from mini_vllm.labtypes import lab01 as _unused  # noqa: F401  (any course import works in the sandbox)

for path in Path(mini_vllm.__file__).resolve().parents[1].glob("phase-16-*/labs/lab-03-*/test_lab.py"):
    spec = importlib.util.spec_from_file_location("stolen_tests", path)
    stolen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(stolen)
    globals()["ORACLE"] = stolen.oracle


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
