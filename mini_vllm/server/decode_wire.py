"""A reply's own channel to the decode process: one socket pair per session, and the bytes on it.

A constrained token used to cross the decode process's one pipe: a pickled tuple, read by the process's
main thread and handed to the session's thread through a queue, the answer read by a reader thread in
the server and handed to the event loop (``call_soon_threadsafe``, a self-pipe): four thread wake-ups a
token, about 0.2 ms of the 0.55 ms a constrained Tekken token cost beyond an unconstrained one (its
round trip against the decode process's own time for it, in one run). Now each session has a socket of
its own: the event loop writes the reply's new ids to it, and its selector wakes the loop when the answer
is there (the socket is registered once per reply, not per token); the session's thread in the decode
process blocks on its end, chooses, and writes the token back: two wake-ups. The process's pipe still
carries everything else (vocabularies, grammars, ``open`` with this socket's other end, ``close``,
``stats``).

Fixed layouts, no pickle. A request: ``(known, count)`` and ``count`` ids, little-endian uint32 (the session
already holds the reply's first ``known`` ids). An answer: ``(kind, size)`` and ``size`` bytes: a token id
(int64), or an error's type name and message (UTF-8, a NUL between them).
"""

from __future__ import annotations

import socket
import struct
from collections.abc import Sequence

REQUEST = struct.Struct("<II")
ANSWER = struct.Struct("<BI")
TOKEN, ERROR = 0, 1
TOKEN_ID = struct.Struct("<q")


def request_bytes(known: int, new: Sequence[int]) -> bytes:
    return REQUEST.pack(known, len(new)) + struct.pack(f"<{len(new)}I", *new)


def _exactly(sock: socket.socket, size: int) -> bytes | None:
    """``size`` bytes from a blocking socket, or None at its end (the server closed it, or shut it down)."""
    buffer = bytearray(size)
    view, got = memoryview(buffer), 0
    while got < size:
        read = sock.recv_into(view[got:])
        if not read:
            return None
        got += read
    return bytes(buffer)


def read_request(sock: socket.socket) -> tuple[int, list[int]] | None:
    """The decode side: the next request on a session's socket (blocking), or None when the reply is over."""
    head = _exactly(sock, REQUEST.size)
    if head is None:
        return None
    known, count = REQUEST.unpack(head)
    body = _exactly(sock, 4 * count) if count else b""
    if body is None:
        return None
    return known, list(struct.unpack(f"<{count}I", body))


def token_bytes(token: int) -> bytes:
    return ANSWER.pack(TOKEN, TOKEN_ID.size) + TOKEN_ID.pack(token)


def error_bytes(name: str, message: str) -> bytes:
    payload = f"{name}\0{message}".encode("utf-8", "replace")
    return ANSWER.pack(ERROR, len(payload)) + payload


def take_answer(pending: bytearray) -> int | tuple[str, str] | None:
    """The server side: the first whole answer in ``pending`` (a token id, or an error's name and message), taken out
    of it; None while it is not all there."""
    if len(pending) < ANSWER.size:
        return None
    kind, size = ANSWER.unpack_from(pending)
    if len(pending) < ANSWER.size + size:
        return None
    payload = bytes(pending[ANSWER.size:ANSWER.size + size])
    del pending[:ANSWER.size + size]
    if kind == TOKEN:
        return int(TOKEN_ID.unpack(payload)[0])
    name, _, message = payload.decode("utf-8", "replace").partition("\0")
    return name, message
