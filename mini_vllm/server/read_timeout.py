"""A read timeout for uvicorn's HTTP/1.1 connections: a client that stops sending mid-request is closed.

uvicorn's ``timeout_keep_alive`` only closes a connection idle *between* requests; h11 itself
has no timers. So a client that sends half its headers, a body shorter than its
``Content-Length`` or a chunked body that never ends would hold a connection (and a slot of
every resource behind it) forever. This protocol arms a timer whenever the server waits for
the client's bytes of a request (headers or body), re-armed by each read, like nginx's
``client_header_timeout`` / ``client_body_timeout``. It is disarmed once the request is whole,
so a long streamed reply to a silent client is never cut.
"""

from __future__ import annotations

import asyncio
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

READ_TIMEOUT_S = 10.0  # the longest pause allowed between two reads of one request


class ReadTimeoutH11Protocol(H11Protocol):
    read_timeout_s = READ_TIMEOUT_S

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._read_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()  # a connection that never sends its first byte counts too

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.conn.their_state in (h11.IDLE, h11.SEND_BODY) and not self.transport.is_closing():
            self._arm()  # more of this request is due
        else:
            self._disarm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm(self) -> None:
        self._disarm()
        self._read_timer = self.loop.call_later(self.read_timeout_s, self._read_timed_out)

    def _disarm(self) -> None:
        if self._read_timer is not None:
            self._read_timer.cancel()
            self._read_timer = None

    def _read_timed_out(self) -> None:
        self._read_timer = None
        waiting_for_client = self.conn.their_state in (h11.IDLE, h11.SEND_BODY)
        if waiting_for_client and self.conn.our_state in (h11.IDLE, h11.SEND_RESPONSE) and \
                not self.transport.is_closing():
            self.transport.close()  # (an idle keep-alive connection is closed sooner by uvicorn's own timer)
