"""Grammar compiles in worker processes the server can kill: bounded in CPU time and memory, one per grammar.

A compile is regex -> character automaton -> lab-08's byte automaton (``lift_to_bytes``), or, for a
grammar with a stack (:class:`CompileJob` with a ``sentence``: a recursive schema, ``json_object``),
lab-09's grammar with each lexeme's byte automaton lifted the same way. It never touches the
vocabulary: the masks are computed as the reply goes, in the decode process (``lazy_masks``,
``decode_worker``), so a new grammar costs its own size, not the vocabulary's. Its size grows with the
schema (the student's code may be slow too), so it never runs in the server's process:

- each compile runs in one of a few spawned worker processes, under ``RLIMIT_CPU`` and
  ``RLIMIT_AS``; past either the worker dies, the request gets a 400 naming the limit, and a
  fresh worker takes its place;
- one compile per (grammar, tokenizer, lab code) at a time: every request for the same grammar
  waits on that one (single-flight), and when the last of them leaves, the compile is killed;
- the results come back as plain data (the byte automaton's table as ``array('i')`` rows; for a
  stack, the rules and each lexeme's table), pickled, kept in a cache bounded in bytes and handed
  to the decode process (``decode_worker``) once;
- requests waiting for a compile count toward a bound (503 past it), like those waiting for
  KV blocks.

A worker (:mod:`mini_vllm.server.compile_worker`) talks to the server over a pipe; a daemon thread per
running compile waits on it, so a compile never holds the event loop and never keeps the process from exiting.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from mini_vllm.api.errors import ApiError
from mini_vllm.server.compile_worker import CompileJob, CompileWorker
from mini_vllm.server.decode_worker import DecodeWorker

CPU_SECONDS = 60  # one compile's CPU time (the reference lifts the largest schema within the limits in seconds)
MEMORY_BYTES = 2 * 1024**3  # a worker's address space (no vocabulary here: automata only)
# A schema's regex compiles within this much CPU, or (lab-09 done) the same schema is compiled with a stack,
# whose size grows linearly with nesting: a schema within the published limits is served, not refused. Measured
# by the worker's own CPU timer (ITIMER_PROF), which stops the compile and keeps the worker: the three strings of
# 100-120 characters take 0.58 s; ten levels of nested arrays would take minutes as a regex, 0.01 s with a stack.
# Either path then serves the schema's first reply in about a second of CPU on Tekken (the server's mask engine).
REGEX_CPU_SECONDS = 0.75
WORKERS = 2
MAX_WAITING = 64  # requests waiting for a compile (running or queued) at once; past this a 503
CACHE_BYTES = 256 * 1024**2  # compiled grammars kept, by their arrays' size


@dataclass
class Compiled:
    """A compiled grammar as the worker sent it: the pickled ("regex" | "stack", plain data) the decode
    process rebuilds."""

    blob: bytes
    key: str = ""  # the blob's hash, the decode process's name for it: computed once, off the event loop

    @property
    def nbytes(self) -> int:
        return len(self.blob)


class CompileFailed(Exception):
    """The worker raised: ``kind`` is the exception's class name."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(f"{kind}: {message}")
        self.kind = kind
        self.message = message


@dataclass
class _Flight:
    task: asyncio.Task[Compiled]
    waiters: int = 0


@dataclass
class CompilePool:
    workers: int = WORKERS
    cpu_seconds: int = CPU_SECONDS
    memory_bytes: int = MEMORY_BYTES
    max_waiting: int = MAX_WAITING
    cache_bytes: int = CACHE_BYTES
    _idle: list[CompileWorker] = field(default_factory=list)
    _live: set[CompileWorker] = field(default_factory=set)
    _slots: asyncio.Semaphore | None = None
    _flights: dict[Any, _Flight] = field(default_factory=dict)
    _cache: OrderedDict[Any, Compiled] = field(default_factory=OrderedDict)
    _cached_bytes: int = 0
    waiting: int = 0  # requests waiting for a compile (running or queued)
    compiles: int = 0  # compiles started (a test checks single-flight with it)
    regex_cpu_seconds: float = REGEX_CPU_SECONDS
    fallbacks: int = 0  # regex compiles past their budget, served with a stack instead
    _lock: threading.Lock = field(default_factory=threading.Lock)
    decoder: DecodeWorker = field(default_factory=DecodeWorker)  # runs the compiled grammars' choices

    def cached(self, key: Any) -> Compiled | None:
        found = self._cache.get(key)
        if found is not None:
            self._cache.move_to_end(key)
        return found

    @property
    def cached_bytes(self) -> int:
        return self._cached_bytes

    async def get(self, key: Any, job: CompileJob) -> Compiled:
        """The compiled grammar for ``key``: cached, joined to the compile under way, or compiled now.

        Cancelling the caller (its client left) leaves the flight; the last to leave kills the compile.
        """
        found = self.cached(key)
        if found is not None:
            return found
        if self.waiting >= self.max_waiting:
            raise ApiError(503, f"the server is overloaded: {self.waiting} requests wait for a grammar to compile "
                           "already; retry later", type="server_error", code="overloaded")
        flight = self._flights.get(key)
        if flight is None:
            task = asyncio.ensure_future(self._compile(job))
            flight = self._flights[key] = _Flight(task)
            task.add_done_callback(lambda done: self._landed(key, done))
        flight.waiters += 1
        self.waiting += 1
        try:
            return await asyncio.shield(flight.task)
        except asyncio.CancelledError:
            if flight.waiters == 1 and not flight.task.done():
                flight.task.cancel()  # nobody else waits for it: kill the compile
            raise
        finally:
            flight.waiters -= 1
            self.waiting -= 1

    def _landed(self, key: Any, task: asyncio.Task[Compiled]) -> None:
        self._flights.pop(key, None)
        if task.cancelled() or task.exception() is not None:
            return
        compiled = task.result()
        size = compiled.nbytes
        if size > self.cache_bytes:
            return  # served, not kept
        self._cache[key] = compiled
        self._cached_bytes += size
        while self._cached_bytes > self.cache_bytes:
            _, old = self._cache.popitem(last=False)
            self._cached_bytes -= old.nbytes

    async def _compile(self, job: CompileJob) -> Compiled:
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.workers)
        async with self._slots:
            self.compiles += 1
            if job.fallback is None:
                return await self._attempt(job, self.cpu_seconds)
            try:  # routed by measured cost: the regex within its budget, else the same schema with a stack
                return await self._attempt(job, self.cpu_seconds, soft_seconds=self.regex_cpu_seconds)
            except ApiError as error:
                if error.code != "grammar_too_complex":
                    raise
                self.fallbacks += 1
                stack = CompileJob("", job.fallback, job.lab08, job.lab09)
                try:
                    return await self._attempt(stack, self.cpu_seconds)
                except NotImplementedError:  # lab-09 is still a stub: the regex's refusal stands
                    raise error from None

    async def _attempt(self, job: CompileJob, cpu_seconds: int, soft_seconds: float = 0) -> Compiled:
        """One compile in a worker, within ``cpu_seconds`` of CPU (and ``soft_seconds``, when given, by the
        worker's own timer: past it the worker stops the compile and stays)."""
        worker = self._idle.pop() if self._idle else await asyncio.to_thread(self._spawn)
        loop = asyncio.get_running_loop()
        answer: asyncio.Future[tuple[str, Any]] = loop.create_future()

        def wait() -> None:
            result = worker.run(job, cpu_seconds, soft_seconds)
            if result[0] == "ok":  # hashed here, once: a long string's automaton is ~10 MB (~14 ms of CPU) on Tekken
                result = ("ok", Compiled(result[1], hashlib.blake2b(result[1], digest_size=16).hexdigest()))

            def settle() -> None:
                if not answer.done():
                    answer.set_result(result)

            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: nobody waits
                loop.call_soon_threadsafe(settle)

        threading.Thread(target=wait, daemon=True, name="mini_vllm-compile-wait").start()
        try:
            kind, payload = await answer
        except asyncio.CancelledError:
            self._discard(worker)
            raise
        if kind == "ok":
            self._idle.append(worker)
            compiled: Compiled = payload
            return compiled
        if kind == "slow":
            self._idle.append(worker)
            raise ApiError(400, f"compiling this grammar went past {soft_seconds} s of CPU time",
                           code="grammar_too_complex")
        if kind == "died":
            self._discard(worker)
            raise ApiError(400, f"compiling this grammar went past this server's limits ({cpu_seconds} s of "
                           f"CPU time, {self.memory_bytes // 1024**2} MiB of memory): simplify the schema "
                           "(fewer or shorter strings, smaller maxLength / maxItems)",
                           code="grammar_too_complex")
        self._idle.append(worker)
        name, message = payload
        if name == "MemoryError":
            raise ApiError(400, f"compiling this grammar needed more than this server's limit of "
                           f"{self.memory_bytes // 1024**2} MiB of memory: simplify the schema",
                           code="grammar_too_complex")
        if name == "NotImplementedError":
            raise NotImplementedError(message)
        raise CompileFailed(name, message)

    def _spawn(self) -> CompileWorker:
        worker = CompileWorker(self.memory_bytes)
        with self._lock:
            self._live.add(worker)
        return worker

    def _discard(self, worker: CompileWorker) -> None:
        with self._lock:
            self._live.discard(worker)
        threading.Thread(target=worker.kill, daemon=True).start()  # kill and reap off the loop

    def close(self) -> None:
        """Kill every worker (the server is stopping): nothing waits for them."""
        with self._lock:
            live, self._live = list(self._live), set()
        self._idle.clear()
        for worker in live:
            worker.kill()
        self.decoder.close()

    def pids(self) -> list[int]:
        with self._lock:
            return [w.process.pid for w in self._live if w.process.pid is not None]
