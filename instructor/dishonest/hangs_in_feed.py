"""Dishonest: loops forever inside feed (and ignores the polite interrupt in flush)."""

import signal

from mini_vllm.labtypes import lab01 as _unused  # noqa: F401  (any course import works in the sandbox)


def utf8_expected_len(lead_byte: int) -> int:
    raise NotImplementedError("lab-03 task 1: implement utf8_expected_len")


class StreamingDetokenizer:
    def __init__(self, tokenizer):
        self.tokenizer = tokenizer

    def feed(self, token_id: int) -> str:
        while True:
            pass

    def flush(self) -> str:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        while True:
            pass

    @property
    def held_bytes(self) -> bytes:
        raise NotImplementedError("lab-03 task 2: implement StreamingDetokenizer.held_bytes")
