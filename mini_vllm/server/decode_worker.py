"""Constrained decoding in a process of its own: the toy model's scores and lab-08's sampler, off the server's GIL.

A constrained token is pure Python over the whole vocabulary (on Tekken, scores for 131,072
tokens and a masked choice among as many). In a thread of the server's process it would still
share the GIL with the event loop, and eight such streams stretched another stream's gaps
several times over. So the choice runs in one spawned process, the place a GPU worker holds
in vLLM: the server sends a request's grammar (plain data, once) and then, per token, the
reply's ids so far; the worker answers the token id. Two daemon threads carry the messages
(a send of a big grammar never blocks the loop); a session ends with ``close``.

Work per vocabulary is done there once: the vocabulary arrives once, and its trie (``token_trie``,
about a second of Python on Tekken) is built once and shared by every grammar's masker. A grammar
arrives once too (its key is its hash; the server and the process keep the same list), and its
masker is made at its first request and kept: the server's mask engine (``mask_engine``; in the
student's release, lab-08's ``TokenMasker``) asked for a state's mask at the state's first visit
(``lazy_masks``: cached as arrays, bounded in bytes), or, for a grammar with a stack
(``stack_decoding``), the engine's split (``stack_masks``; in the release, lab-09's ``SplitMasker``).
Each reply runs in a thread of its own there, time-sliced, and is cancelled where it stands when its
client leaves (``decode_sessions``).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import itertools
import multiprocessing
import queue
import threading
from collections.abc import Sequence
from typing import Any

from mini_vllm.api.errors import ApiError
from mini_vllm.labtypes.lab08 import Vocabulary
from mini_vllm.server.decode_sessions import Sent, worker_main

# The decode process's address space (RLIMIT_AS), enforced by the OS: Tekken's vocabulary, its trie and the
# toy model take about 300 MiB of it. A reply whose masks would pass it is a 503 naming the limit (the caches
# are dropped, so the process goes on serving), never the process's death.
MEMORY_BYTES = 1024**3


def _settle(loop: asyncio.AbstractEventLoop, future: asyncio.Future[int], message: tuple[Any, ...]) -> None:
    """Hand a worker's answer to the coroutine waiting for it, on its own loop."""
    def settle() -> None:
        if future.done():
            return
        if message[0] == "token":
            future.set_result(message[2])
        elif message[2] == "NotImplementedError":
            future.set_exception(NotImplementedError(message[3]))
        elif message[2] == "MemoryError":
            future.set_exception(ApiError(
                503, f"this reply's masks needed more than the decode process's memory limit of {message[3]} MiB; "
                "its caches were dropped: retry, or simplify the schema",
                type="server_error", code="out_of_memory"))
        else:
            future.set_exception(RuntimeError(f"{message[2]}: {message[3]}"))

    with contextlib.suppress(RuntimeError):  # the loop closed: nobody waits
        loop.call_soon_threadsafe(settle)


class DecodeWorker:
    """The server's side of the decode process: ``open`` a session, ``next`` per token, ``close``."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._process: Any = None
        self._outbox: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._pending: dict[int, tuple[asyncio.AbstractEventLoop, asyncio.Future[int]]] = {}
        self._vocabularies: set[str] = set()
        self._sent = Sent()
        self._ids = itertools.count()
        self.memory_bytes = MEMORY_BYTES
        self.grammars_sent = 0  # grammars handed to the process (a test counts: once per grammar, not per request)

    def _start(self) -> None:
        context = multiprocessing.get_context("spawn")
        conn, child = context.Pipe()
        self._process = context.Process(target=worker_main, args=(child, self.memory_bytes), daemon=True,
                                        name="mini_vllm-decode")
        self._process.start()
        child.close()
        self._vocabularies = set()
        self._sent = Sent()
        outbox: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._outbox = outbox
        threading.Thread(target=self._send_all, args=(conn, outbox), daemon=True).start()
        threading.Thread(target=self._read_all, args=(conn,), daemon=True).start()

    def _send_all(self, conn: Any, outbox: queue.SimpleQueue[Any]) -> None:
        while (message := outbox.get()) is not None:
            try:
                conn.send(message)
            except (OSError, EOFError):
                return

    def _read_all(self, conn: Any) -> None:
        while True:
            try:
                message = conn.recv()
            except (EOFError, OSError):
                break
            with self._lock:
                entry = self._pending.pop(message[1], None)
            if entry is not None:
                _settle(*entry, message)
        with self._lock:  # the process died: every waiting token fails
            entries, self._pending = list(self._pending.items()), {}
        for request_id, entry in entries:
            _settle(*entry, ("error", request_id, "RuntimeError", "the decode process died"))

    def open(self, vocab_key: str, vocab: Vocabulary, raw: tuple[list[bytes], list[int], int], blob: bytes,
             lab_paths: tuple[str, str], user_message: str, thinking: bool, tool_call: bool) -> int:
        """A session for one reply. The vocabulary and the grammar cross to the process once, not per request."""
        grammar_key = hashlib.blake2b(blob, digest_size=16).hexdigest()
        with self._lock:
            if self._process is None or not self._process.is_alive():
                self._start()
            if vocab_key not in self._vocabularies:
                self._outbox.put(("vocab", vocab_key, vocab, *raw))
                self._vocabularies.add(vocab_key)
            new, _ = self._sent.use(grammar_key)
            if new:
                self._outbox.put(("grammar", grammar_key, blob))
                self.grammars_sent += 1
            sid = next(self._ids)
            self._outbox.put(("open", sid, vocab_key, grammar_key, lab_paths, user_message, thinking, tool_call))
        return sid

    async def next(self, sid: int, ids: Sequence[int]) -> int:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[int] = loop.create_future()
        request_id = next(self._ids)
        with self._lock:
            self._pending[request_id] = (loop, future)
            self._outbox.put(("next", request_id, sid, list(ids)))
        return await future

    async def stats(self) -> Any:
        """The process's counts: masks computed, bytes of masks kept, maskers, grammars and vocabularies held."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        request_id = next(self._ids)
        with self._lock:
            self._pending[request_id] = (loop, future)
            self._outbox.put(("stats", request_id))
        return await future

    def close_session(self, sid: int) -> None:
        self._outbox.put(("close", sid))

    def close(self) -> None:
        with self._lock:
            process, self._process = self._process, None
            self._outbox.put(None)
        if process is not None and process.is_alive():
            process.kill()
            process.join(5)
