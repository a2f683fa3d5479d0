"""Dishonest: runs what an earlier grading child left for it: a file in a folder every user may write
(/run/lock, /dev/shm, /var/tmp, /tmp), or a System V shared memory segment.

The earlier child is a classmate's correct lab-03 that posts its own source on import (see
``MAILBOX_POSTER`` in tests/test_grader_walls.py).
"""

import contextlib
import ctypes

MAILBOXES = ["/run/lock", "/var/lock", "/dev/shm", "/var/tmp", "/tmp"]
NAME = "mini-vllm-mailbox.py"
SHM_KEY = 0x5EED03


def _from_shared_memory() -> str:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.shmat.restype = ctypes.c_void_p
    segment = libc.shmget(SHM_KEY, 0, 0)
    if segment < 0:
        return ""
    address = libc.shmat(segment, None, 0)
    return ctypes.string_at(address).decode() if address not in (None, ctypes.c_void_p(-1).value) else ""


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
_posted = ""
for _folder in MAILBOXES:
    with contextlib.suppress(OSError):
        with open(f"{_folder}/{NAME}") as _mail:
            _posted = _mail.read()
        break
if not _posted:
    with contextlib.suppress(OSError):
        _posted = _from_shared_memory()
if _posted:
    exec(compile(_posted, NAME, "exec"), globals())
