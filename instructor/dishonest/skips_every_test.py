"""Dishonest: calls pytest.skip in every stub, hoping the lab drops out of the total."""

import pytest

from mini_vllm.labtypes import lab01 as _unused  # noqa: F401  (any course import works in the sandbox)

_skip = pytest.skip


def utf8_expected_len(lead_byte: int) -> int:
    _skip("not today")


class StreamingDetokenizer:
    def __init__(self, tokenizer):
        self.tokenizer = tokenizer

    def feed(self, token_id: int) -> str:
        _skip("not today")

    def flush(self) -> str:
        _skip("not today")

    @property
    def held_bytes(self) -> bytes:
        _skip("not today")
