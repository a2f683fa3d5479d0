"""Constrained decoding in a process of its own: the toy model's scores and lab-08's sampler, off the server's GIL.

A constrained token is pure Python over the whole vocabulary (on Tekken, scores for 131,072
tokens and a masked choice among as many). In a thread of the server's process it would still
share the GIL with the event loop, and eight such streams stretched another stream's gaps
several times over. So the choice runs in one spawned process, the place a GPU worker holds
in vLLM: the server sends a request's grammar (plain data, once) and then, per token, the
reply's ids the session does not hold yet (a few dozen bytes, written by the event loop itself when nothing
is queued before it); the worker answers the token id. Two daemon threads carry the messages
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
# A token's request is written to the pipe by the event loop itself when nothing waits in the outbox (the sender
# thread's hand-off cost a thread switch a token, ~0.1 ms, more under load). A request is a few dozen bytes (the
# reply's new ids only), and at most this many wait unanswered, so they fit the pipe's 64 KiB and a write never
# blocks the loop; past it, or behind a queued grammar, they go through the sender thread as before.
DIRECT_PENDING = 256


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
        self._send_lock = threading.Lock()  # one writer of the pipe at a time: the sender thread or the loop
        self._process: Any = None
        self._outbox: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._conn: Any = None
        self._queued = 0  # messages in the outbox not yet written (a direct write must not overtake them)
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
        self._outbox, self._conn, self._queued = outbox, conn, 0
        threading.Thread(target=self._send_all, args=(conn, outbox), daemon=True).start()
        threading.Thread(target=self._read_all, args=(conn,), daemon=True).start()

    def _send_all(self, conn: Any, outbox: queue.SimpleQueue[Any]) -> None:
        while (message := outbox.get()) is not None:
            try:
                with self._send_lock:
                    conn.send(message)
            except (OSError, EOFError):
                return
            with self._lock:
                if self._outbox is outbox:
                    self._queued -= 1

    def _post(self, message: tuple[Any, ...]) -> None:
        """Queue ``message`` for the sender thread (called with ``_lock`` held)."""
        self._queued += 1
        self._outbox.put(message)

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
                self._post(("vocab", vocab_key, vocab, *raw))
                self._vocabularies.add(vocab_key)
            new, _ = self._sent.use(grammar_key)
            if new:
                self._post(("grammar", grammar_key, blob))
                self.grammars_sent += 1
            sid = next(self._ids)
            self._post(("open", sid, vocab_key, grammar_key, lab_paths, user_message, thinking, tool_call))
        return sid

    async def next(self, sid: int, ids: Sequence[int], known: int = 0) -> int:
        """The token after ``ids``; the session already holds the first ``known`` of them (only the rest cross)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[int] = loop.create_future()
        request_id = next(self._ids)
        message = ("next", request_id, sid, known, list(ids[known:]))
        with self._lock:
            self._pending[request_id] = (loop, future)
            if self._queued == 0 and len(self._pending) <= DIRECT_PENDING and len(message[4]) <= 16 \
                    and self._send_lock.acquire(blocking=False):
                try:
                    self._conn.send(message)
                except (OSError, EOFError):  # the process died (its reader may have failed the others already)
                    self._pending.pop(request_id, None)
                    future.set_exception(RuntimeError("the decode process died"))
                finally:
                    self._send_lock.release()
            else:
                self._post(message)
        return await future

    async def stats(self) -> Any:
        """The process's counts: masks computed, bytes of masks kept, maskers, grammars and vocabularies held."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        request_id = next(self._ids)
        with self._lock:
            self._pending[request_id] = (loop, future)
            self._post(("stats", request_id))
        return await future

    def close_session(self, sid: int) -> None:
        with self._lock:
            self._post(("close", sid))

    def close(self) -> None:
        with self._lock:
            process, self._process = self._process, None
            self._outbox.put(None)
        if process is not None and process.is_alive():
            process.kill()
            process.join(5)
