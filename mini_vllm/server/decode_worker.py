"""Constrained decoding in a process of its own: the toy model's scores and lab-08's sampler, off the server's GIL.

A constrained token is pure Python over the whole vocabulary (on Tekken, scores for 131,072
tokens and a masked choice among as many). In a thread of the server's process it would still
share the GIL with the event loop, and eight such streams stretched another stream's gaps
several times over. So the choice runs in one spawned process, the place a GPU worker holds
in vLLM: the server sends a request's grammar (plain data, once) over the process's pipe (a daemon
thread writes it: a send of a big grammar never blocks the loop), and opens a session for each reply
with a socket of its own (``decode_wire``): per token, the event loop writes the reply's ids the
session does not hold yet (a few bytes) to that socket and reads the token id back from it. A session
ends with ``close``.

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
import itertools
import multiprocessing
import queue
import socket
import threading
from collections.abc import Sequence
from multiprocessing.reduction import send_handle
from typing import Any

from mini_vllm.api.errors import ApiError
from mini_vllm.labtypes.lab08 import Vocabulary
from mini_vllm.server.decode_sessions import Sent, worker_main
from mini_vllm.server.decode_wire import request_bytes, take_answer

# The decode process's address space (RLIMIT_AS), enforced by the OS: Tekken's vocabulary, its trie and the
# toy model take about 300 MiB of it. A reply whose masks would pass it is a 503 naming the limit (the caches
# are dropped, so the process goes on serving), never the process's death.
MEMORY_BYTES = 1024**3


def _failure(name: str, message: str) -> Exception:
    """The exception a session's error answer stands for."""
    if name == "NotImplementedError":
        return NotImplementedError(message)
    if name == "MemoryError":
        return ApiError(503, f"this reply's masks needed more than the decode process's memory limit of {message} MiB; "
                        "its caches were dropped: retry, or simplify the schema", type="server_error",
                        code="out_of_memory")
    return RuntimeError(f"{name}: {message}")


def _settle(loop: asyncio.AbstractEventLoop, future: asyncio.Future[Any], message: tuple[Any, ...]) -> None:
    """Hand a worker's answer on the pipe (``stats``) to the coroutine waiting for it, on its own loop."""
    def settle() -> None:
        if future.done():
            return
        if message[0] == "token":
            future.set_result(message[2])
        else:
            future.set_exception(_failure(message[2], message[3]))

    with contextlib.suppress(RuntimeError):  # the loop closed: nobody waits
        loop.call_soon_threadsafe(settle)


class Channel:
    """The server's end of one session's socket (non-blocking, read and written by the event loop only): the loop
    watches it for the whole reply (one registration, not one a token) and hands each answer to the token waiting."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.pending = bytearray()  # bytes read that do not make a whole answer yet
        self._loop: asyncio.AbstractEventLoop | None = None
        self._waiter: asyncio.Future[Any] | None = None
        self._broken = False  # the other end closed, or a token was abandoned half way: nothing more to read here

    async def next(self, ids: Sequence[int], known: int = 0) -> int:
        """The token after ``ids``; the session already holds the first ``known`` of them (only the rest cross)."""
        loop = asyncio.get_running_loop()
        if self._broken:
            raise RuntimeError("the decode process died")
        if self._loop is not loop:
            if self._loop is not None:
                with contextlib.suppress(RuntimeError, ValueError):
                    self._loop.remove_reader(self.sock)
            loop.add_reader(self.sock, self._readable)
            self._loop = loop
        waiter = self._waiter = loop.create_future()
        try:
            await loop.sock_sendall(self.sock, request_bytes(known, ids[known:]))
            answer = await waiter
        except OSError as error:  # its other end closed: the decode process died (or never received it)
            raise RuntimeError("the decode process died") from error
        except BaseException:
            self._broken = True  # cancelled: an answer may still come, and it would be taken for the next token's
            raise
        finally:
            self._waiter = None
        if isinstance(answer, int):
            return answer
        raise _failure(*answer)

    def _readable(self) -> None:
        try:
            data = self.sock.recv(65536)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        waiter = self._waiter
        if not data:  # the other end closed: stop watching (a closed end is always readable)
            self._broken = True
            if self._loop is not None:
                self._loop.remove_reader(self.sock)
            if waiter is not None and not waiter.done():
                waiter.set_exception(ConnectionError("the decode process died"))
            return
        self.pending += data
        answer = take_answer(self.pending)
        if answer is not None and waiter is not None and not waiter.done():
            waiter.set_result(answer)

    def close(self) -> None:
        if self._loop is not None:
            with contextlib.suppress(RuntimeError, ValueError):  # the loop closed already
                self._loop.remove_reader(self.sock)
        self.sock.close()


class DecodeWorker:
    """The server's side of the decode process: ``open`` a session, ``next`` per token, ``close``."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._process: Any = None
        self._outbox: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._pending: dict[int, tuple[asyncio.AbstractEventLoop, asyncio.Future[Any]]] = {}
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
        self._outbox.put(None)  # a dead process's sender: close what it still holds, then stop
        self._outbox = queue.SimpleQueue()
        threading.Thread(target=self._send_all, args=(conn, self._outbox, self._process.pid), daemon=True).start()
        threading.Thread(target=self._read_all, args=(conn,), daemon=True).start()

    @staticmethod
    def _send_all(conn: Any, outbox: queue.SimpleQueue[Any], pid: int) -> None:
        broken = False
        while (item := outbox.get()) is not None:
            message, theirs = item
            try:
                if not broken:
                    conn.send(message)
                    if theirs is not None:  # right after its ``open``: the process reads it there
                        send_handle(conn, theirs.fileno(), pid)
            except (OSError, EOFError):
                broken = True  # the process died: what follows is dropped, and each session's socket closed
            finally:
                if theirs is not None:
                    theirs.close()  # the process holds its own copy now (or, dead, none: our end reads its end)

    def _post(self, message: tuple[Any, ...], theirs: socket.socket | None = None) -> None:
        """Queue ``message`` (and a session's socket end to hand over) for the sender thread (``_lock`` held)."""
        self._outbox.put((message, theirs))

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
             grammar_key: str, lab_paths: tuple[str, str], user_message: str, thinking: bool,
             tool_call: bool) -> tuple[int, Channel]:
        """A session for one reply, and its channel. The vocabulary and the grammar (``grammar_key``: its hash, made
        once by the compile) cross to the process once, not per request."""
        ours, theirs = socket.socketpair()
        ours.setblocking(False)
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
            self._post(("open", sid, vocab_key, grammar_key, lab_paths, user_message, thinking, tool_call), theirs)
        return sid, Channel(ours)

    async def stats(self) -> Any:
        """The process's counts: masks computed, bytes of masks kept, maskers, grammars and vocabularies held."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        request_id = next(self._ids)
        with self._lock:
            self._pending[request_id] = (loop, future)
            self._post(("stats", request_id))
        return await future

    def close_session(self, sid: int, channel: Channel) -> None:
        """The reply is over: its session stops (at once, in whatever it was doing), its socket closes."""
        channel.close()
        with self._lock:
            self._post(("close", sid))

    def close(self) -> None:
        with self._lock:
            process, self._process = self._process, None
            self._outbox.put(None)
        if process is not None and process.is_alive():
            process.kill()
            process.join(5)
