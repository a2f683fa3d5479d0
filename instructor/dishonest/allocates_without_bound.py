"""Dishonest: allocates memory until something stops it, inside feed."""

from mini_vllm.labtypes import lab01 as _unused  # noqa: F401  (any course import works in the sandbox)

_HOARD = []


def utf8_expected_len(lead_byte: int) -> int:
    raise NotImplementedError("lab-03 task 1: implement utf8_expected_len")


class StreamingDetokenizer:
    def __init__(self, tokenizer):
        self.tokenizer = tokenizer

    def feed(self, token_id: int) -> str:
        while True:
            _HOARD.append(bytearray(64 * 2**20))

    def flush(self) -> str:
        raise NotImplementedError("lab-03 task 3: implement StreamingDetokenizer.flush")

    @property
    def held_bytes(self) -> bytes:
        raise NotImplementedError("lab-03 task 2: implement StreamingDetokenizer.held_bytes")
