"""One end of the sandbox's channel: requests, replies, and the objects each side lends the other.

Both processes run a :class:`Peer`. A request names an operation on an object the receiver
owns (``call``, ``getattr``, ...) or on a lab by path (``call_path``); while a side waits for
its reply it serves the other side's requests, so calls nest: the tests call the student's
``feed``, which calls back the trusted tokenizer, which answers, and ``feed`` returns.

The two sides do not trust each other equally: what each lends is its :class:`~.lenders.Lender`'s
to allow (:mod:`.lenders`), and the other side's objects are held as :class:`~.proxies.Remote` proxies
(:mod:`.proxies`).
"""

from __future__ import annotations

import os
import select
import struct
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

from mini_vllm.sandbox import served
from mini_vllm.sandbox.lenders import Lender
from mini_vllm.sandbox.mirrors import BUILDERS
from mini_vllm.sandbox.policy import MAX_MESSAGE
from mini_vllm.sandbox.proxies import Remote, public_methods
from mini_vllm.sandbox.wire import Codec, WireError

REQUEST, REPLY, FAILED = 0, 1, 2
PARENT, CHILD = 0, 1
_HEADER = struct.Struct("<I")


class ChannelClosed(Exception):
    """The other process is gone (it exited, crashed, or was killed)."""


class CallTimedOut(Exception):
    """The reply did not come within the budget."""


class ServingStopped(BaseException):
    """The trusted side stopped serving the child's requests: they used up the call's or the test's CPU budget.

    A BaseException, so no ``except Exception`` in the code being served (a reference stage) swallows it.
    """

    def __init__(self, message: str, whole_test: bool = False) -> None:
        super().__init__(message)
        self.whole_test = whole_test  # the test's own bound, not one call's: no retry


class Peer:
    """One end of the channel: a table of lent objects, and a loop that sends and serves requests."""

    def __init__(self, side: int, read_fd: int, write_fd: int, lender: Lender,
                 rebuild_family: Callable[[str], Any]) -> None:
        self.side = side
        self._read_fd = read_fd
        self._write_fd = write_fd
        self.lender = lender
        self._lent: dict[int, Any] = {}
        self._sent: dict[int, int] = {}  # object id -> how many times a reference to it went out
        self.seen: dict[int, int] = {}  # remote object id -> how many references to it came in
        self._proxies: weakref.WeakValueDictionary[int, Remote] = weakref.WeakValueDictionary()
        self._ids: dict[int, int] = {}  # id(obj) -> object id, so one object is one reference
        self._next_id = 1
        self._described: set[type] = set()
        self._methods: dict[int, frozenset[str]] = {}
        self.released: list[int] = []
        self._next_request = 1
        self._lock = threading.RLock()
        self._buffer = bytearray()
        self.received_bytes = 0  # everything read from the other side (the trusted side bounds it per test)
        self.largest_message = 0
        self._chunk = bytearray(1 << 20)
        self._chunk_view = memoryview(self._chunk)
        self.closed = False
        self.codec = Codec(self._to_ref, self._from_ref, rebuild_family, self._build_mirror, self._build_served,
                           side == PARENT)
        self.serving_args = False  # True while encoding arguments the trusted side chose to lend
        self.class_names: dict[int, str] = {}  # remote object id -> its class's name, for messages

    # ------------------------------------------------------------------ references

    def _build_mirror(self, kind: Any, state: Any) -> Any:
        build = BUILDERS.get(kind) if isinstance(kind, str) else None
        if build is None:
            raise WireError(f"no copy of kind {kind!r}")
        return build(state)

    def _build_served(self, kind: Any, object_id: Any, facts: Any) -> Any:
        """A stand-in for an object the trusted side serves: each declared method is a request back."""
        make = served.STAND_INS.get(kind) if isinstance(kind, str) else None
        if self.side == PARENT or make is None or not isinstance(object_id, int) or not isinstance(facts, dict):
            raise WireError("only the trusted side serves objects")

        def call(method: str, args: list[Any]) -> Any:
            return self.request("serve", object_id, method, args)
        return make(call, object_id, facts)

    def _to_ref(self, obj: Any) -> list[Any]:
        if isinstance(obj, Remote) and obj._sandbox_peer is self:  # a proxy going home: the owner's own object
            return [1 - self.side, obj._sandbox_id, 0, None, "Remote"]
        home = getattr(obj, "_home", None) if isinstance(obj, served.SERVED_STAND_INS) else None
        if isinstance(home, int):  # a stand-in going back: it is the other side's own object
            return [1 - self.side, home, 0, None, type(obj).__name__]
        if self.lender.strict and not self.serving_args:
            self.lender.check_result(obj)
        object_id = self._ids.get(id(obj))
        if object_id is None or self._lent.get(object_id) is not obj:
            object_id = self._next_id
            self._next_id += 1
            self._lent[object_id] = obj
            self._ids[id(obj)] = object_id
        self._sent[object_id] = self._sent.get(object_id, 0) + 1
        cls = type(obj)
        methods = None
        if cls not in self._described:
            self._described.add(cls)
            methods = public_methods(cls)
        return [self.side, object_id, id(cls), methods, cls.__qualname__]

    def _from_ref(self, payload: list[Any]) -> Any:
        owner, object_id, class_key, methods, class_name = payload
        if owner == self.side:  # one of ours, coming home
            if object_id not in self._lent:
                raise WireError(f"no object {object_id} here")
            return self._lent[object_id]
        if methods is not None:
            self._methods[class_key] = frozenset(methods)
        if isinstance(class_name, str):
            self.class_names[object_id] = class_name
        self.seen[object_id] = self.seen.get(object_id, 0) + 1
        proxy = self._proxies.get(object_id)
        if proxy is None:  # one proxy per remote object, so its release means nobody here holds it
            proxy = self._proxies[object_id] = Remote(self, object_id, self._methods.get(class_key, frozenset()))
        return proxy

    # ------------------------------------------------------------------ the wire

    def send(self, message: list[Any]) -> None:
        self._write(self.codec.encode(message))

    def _write(self, data: bytes) -> None:
        if len(data) > MAX_MESSAGE:  # the other side would refuse it: say so here, where the cause is
            raise WireError(f"a message of {len(data):,} bytes, over the {MAX_MESSAGE:,}-byte limit")
        try:
            view = memoryview(_HEADER.pack(len(data)) + data)
            while view:
                written = os.write(self._write_fd, view)
                view = view[written:]
        except (BrokenPipeError, OSError) as error:
            self.closed = True
            raise ChannelClosed(str(error)) from None

    def receive(self, deadline: float | None) -> list[Any]:
        while True:
            if len(self._buffer) >= 4:
                (size,) = _HEADER.unpack_from(self._buffer)
                self.largest_message = max(self.largest_message, size)
                if size > MAX_MESSAGE:
                    self.closed = True
                    raise WireError(f"a message of {size:,} bytes, over the {MAX_MESSAGE:,}-byte limit")
                if len(self._buffer) >= 4 + size:
                    data = bytes(self._buffer[4:4 + size])
                    del self._buffer[:4 + size]
                    message = self.codec.decode(data)
                    if not (isinstance(message, list) and len(message) >= 2 and message[0] in (0, 1, 2)):
                        raise WireError("a message of the wrong shape")
                    return message
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise CallTimedOut()
                ready, _, _ = select.select([self._read_fd], [], [], left)
                if not ready:
                    raise CallTimedOut()
            try:  # into a buffer kept from read to read: os.read(fd, 1 MiB) maps and unmaps a MiB each time
                got = os.readv(self._read_fd, [self._chunk])
            except OSError as error:
                got = 0
                del error
            if not got:
                self.closed = True
                raise ChannelClosed("the other process closed the channel")
            self.received_bytes += got
            self._buffer += self._chunk_view[:got]

    # ------------------------------------------------------------------ requests

    def request(self, op: str, *args: Any) -> Any:
        """Send one request and wait for its reply, serving the other side's requests meanwhile."""
        with self._lock:
            if self.closed:
                raise ChannelClosed("the channel is closed")
            return self._await(self._send_request(op, args), None)

    def _send_request(self, op: str, args: tuple[Any, ...]) -> int:
        number = self._next_request
        self._next_request += 1
        released, self.released = self.released, []
        self.serving_args = True  # what the requester passes, it chose to lend
        try:
            self.send([REQUEST, number, op, list(args), released])
        finally:
            self.serving_args = False
        return number

    def _await(self, number: int, deadline: float | None) -> Any:
        while True:
            message = self.receive(deadline)
            kind = message[0]
            if kind == REQUEST:
                self.serve(message)
                continue
            if not isinstance(message[1], int) or message[1] > number:
                raise WireError(f"a reply to request {message[1]!r} while waiting for {number}")
            if message[1] < number:
                continue  # the late reply of a request that was abandoned (interrupted): nobody waits for it
            if kind == REPLY:
                return message[2]
            error = message[2]
            if not isinstance(error, BaseException):
                raise WireError("a failure that is not an exception")
            raise error

    def serve(self, message: list[Any]) -> None:
        """Carry out one request from the other side and send its reply."""
        _, number, op, args, released = message[:5]
        for entry in released if isinstance(released, list) else ():
            self._release(entry)
        try:
            result = self.perform(op, args)
            reply: list[Any] = [REPLY, number, result]
            self.send(reply)
        except (ChannelClosed, KeyboardInterrupt, ServingStopped):
            raise
        except BaseException as error:  # the other side's request failed: it gets the exception
            self.annotate(error)
            try:
                self.send([FAILED, number, error])
            except WireError as unsendable:
                self.send([FAILED, number, WireError(str(unsendable))])

    def _release(self, entry: Any) -> None:
        """The other side dropped its proxy. Forget the object, unless a reference to it is still on the way.

        A release counts the references its side had received; if more went out since, a new
        proxy stands for the object over there, and it will send its own release.
        """
        if not (isinstance(entry, list) and len(entry) == 2):
            return
        object_id, seen = entry
        if self._sent.get(object_id) != seen:
            return
        obj = self._lent.pop(object_id, None)
        self._sent.pop(object_id, None)
        if obj is not None:
            self._ids.pop(id(obj), None)

    def annotate(self, error: BaseException) -> None:
        """Hook: the child attaches the student's frames of the traceback."""

    def perform(self, op: str, args: list[Any]) -> Any:
        lender = self.lender
        if op == "call_path":
            path, call_args, kwargs = args
            return lender.call_path(path, call_args, kwargs)
        obj = self._owned(args[0])
        if op == "serve":  # a declared interface's method: arguments checked, result plain data
            return lender.serve(obj, args[1], args[2])
        lender.check_open(obj)
        if op == "call":
            _, name, call_args, kwargs = args
            lender.check_method(obj, name)
            target = obj if name is None else getattr(obj, name)
            return target(*call_args, **kwargs)
        if op == "map":  # the same method over many argument lists, in order, as a loop would call it
            _, name, calls = args
            lender.check_method(obj, name)
            method = getattr(obj, name)
            return [method(*call) for call in calls]
        if op == "getattr":
            lender.check_attribute(obj, args[1])
            return getattr(obj, args[1])
        if op == "setattr":
            lender.check_set(obj, args[1])
            setattr(obj, args[1], args[2])
            return None
        if op == "iter":
            return iter(obj)
        if op == "bool":
            return bool(obj)
        if op == "contains":
            return args[1] in obj
        if op == "repr":
            return repr(obj)
        if op == "str":
            return str(obj)
        raise WireError(f"unknown operation {op!r}")

    def _owned(self, object_id: Any) -> Any:
        if not isinstance(object_id, int) or object_id not in self._lent:
            raise WireError(f"no object {object_id!r} here")
        return self._lent[object_id]
