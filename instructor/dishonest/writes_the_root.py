"""Dishonest: writes where no figure of its memory looks: files in ``/`` (bubblewrap's root is a tmpfs).

Where the root is writable, 64 MiB there are memory held unseen (``memory_held`` reads the child's
anonymous and shared pages, its ``/tmp`` and its memory files), and a batch of such children could fill
the host. Every stub below says what the write did, so the walls test can read it in each failure.
"""

import os

_TRIED = []
for _path, _size in (("/x", 0), ("/stash.bin", 64 * 2**20)):
    try:
        with open(_path, "wb") as _file:
            _file.write(b"\x01" * _size)
        _TRIED.append(f"wrote {_path}")
    except OSError as _error:
        _TRIED.append(f"could not write {_path}: {os.strerror(_error.errno or 0)}")
try:
    os.mkdir("/stash")
    _TRIED.append("made /stash")
except OSError as _error:
    _TRIED.append(f"could not make /stash: {os.strerror(_error.errno or 0)}")
_SAID = "root writes: " + "; ".join(_TRIED)


def utf8_expected_len(lead_byte: int) -> int:
    raise NotImplementedError(f"lab-03 task 1: implement utf8_expected_len ({_SAID})")


class StreamingDetokenizer:
    def __init__(self, tokenizer):
        self.tokenizer = tokenizer

    def feed(self, token_id: int) -> str:
        raise NotImplementedError(f"lab-03 task 2: implement StreamingDetokenizer.feed ({_SAID})")

    def flush(self) -> str:
        raise NotImplementedError(f"lab-03 task 3: implement StreamingDetokenizer.flush ({_SAID})")

    @property
    def held_bytes(self) -> bytes:
        raise NotImplementedError(f"lab-03 task 2: implement StreamingDetokenizer.held_bytes ({_SAID})")
