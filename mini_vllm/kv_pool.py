"""A KV-cache block pool: the memory a request holds while it generates.

Real engines keep each request's attention keys and values in fixed-size blocks.
The teaching engine stores nothing in them, but it does the accounting, so a test can
watch a request take blocks as it grows and give them all back when it finishes or is
aborted (a leak here is a server that slowly runs out of memory).
"""

from __future__ import annotations

import threading


class NoFreeBlocks(RuntimeError):
    """The pool is exhausted."""


class BlockPool:
    def __init__(self, num_blocks: int = 32768, block_size: int = 16) -> None:
        self.num_blocks = num_blocks
        self.block_size = block_size
        self._held: dict[str, int] = {}  # request id -> blocks held
        self._lock = threading.Lock()  # read from test threads while the server's loop writes

    @property
    def num_free_blocks(self) -> int:
        with self._lock:
            return self.num_blocks - sum(self._held.values())

    def blocks_held(self, request_id: str) -> int:
        with self._lock:
            return self._held.get(request_id, 0)

    def reserve(self, request_id: str, num_tokens: int) -> None:
        """Make sure ``request_id`` holds enough blocks for ``num_tokens`` tokens."""
        needed = -(-num_tokens // self.block_size)  # ceiling division
        with self._lock:
            extra = needed - self._held.get(request_id, 0)
            if extra <= 0:
                return
            if extra > self.num_blocks - sum(self._held.values()):
                raise NoFreeBlocks(f"request {request_id} needs {extra} more blocks; the pool is full")
            self._held[request_id] = needed

    def try_reserve(self, request_id: str, num_tokens: int) -> bool:
        """Like :meth:`reserve`, but answers False instead of raising when the pool is full."""
        try:
            self.reserve(request_id, num_tokens)
        except NoFreeBlocks:
            return False
        return True

    def free(self, request_id: str) -> int:
        """Give back every block of ``request_id``; returns how many."""
        with self._lock:
            return self._held.pop(request_id, 0)
