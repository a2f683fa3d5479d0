"""Dishonest: answers with 240 MiB. feed returns a string that large; flush writes a message that size
straight into the channel, past the child's own checks. Each must fail its test, and the grading
process must not grow by what was sent."""

import os
import struct
import sys

HUGE = 240 * 2**20
TEXT = "x" * HUGE  # made once: the point is what crosses, not the child's time


def utf8_expected_len(lead_byte: int) -> int:
    raise NotImplementedError("lab-03 task 1: implement utf8_expected_len")


class StreamingDetokenizer:
    def __init__(self, tokenizer):
        self.tokenizer = tokenizer
        self.sent = False

    def feed(self, token_id: int) -> str:
        if self.sent:  # once per object is enough to fail a test
            raise NotImplementedError("lab-03 task 2: implement StreamingDetokenizer.feed")
        self.sent = True
        return TEXT

    def flush(self) -> str:
        channel = int(sys.argv[2])  # the child's end of the pipe to the grader (its command line says which)
        os.write(channel, struct.pack("<I", HUGE))
        block = b"\x00" * 2**20
        for _ in range(HUGE // len(block)):
            os.write(channel, block)
        return ""

    @property
    def held_bytes(self) -> bytes:
        raise NotImplementedError("lab-03 task 2: implement StreamingDetokenizer.held_bytes")
