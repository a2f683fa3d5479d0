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

A worker talks to the server over a pipe; a daemon thread per running compile waits on it,
so a compile never holds the event loop and never keeps the process from exiting.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import multiprocessing
import os
import pickle
import signal
import threading
from array import array
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from mini_vllm.api.errors import ApiError
from mini_vllm.grammars.schema_grammar import Sentence
from mini_vllm.labtypes.lab08 import ByteAutomaton, Vocabulary, token_trie
from mini_vllm.server.decode_worker import DecodeWorker
from mini_vllm.server.stack_decoding import rebuild_grammar

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


@dataclass(frozen=True)
class CompileJob:
    """What to compile: lab-08's regex, or (``sentence``) lab-09's grammar with a stack, by whose lab code.

    With both (``json_object``), the regex is the fallback while lab-09 is still the starter's stub.
    """

    regex: str
    sentence: Sentence | None
    lab08: str  # the lab files load_lab chose
    lab09: str
    fallback: Sentence | None = None  # the same schema with a stack, where the regex's compile passes its budget


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


# ------------------------------------------------------------------ the worker process


class _PastBudget(BaseException):
    """The compile's CPU timer ran out (a BaseException: the student's ``except Exception`` lets it through)."""


def _past_budget(signum: int, frame: Any) -> None:
    raise _PastBudget


def _worker_main(conn: Any, memory_bytes: int) -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    signal.signal(signal.SIGPROF, _past_budget)
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return
        _, job, cpu_seconds, soft_seconds = message
        used = resource.getrusage(resource.RUSAGE_SELF)
        spent = int(used.ru_utime + used.ru_stime) + 1
        resource.setrlimit(resource.RLIMIT_CPU, (spent + int(cpu_seconds), resource.RLIM_INFINITY))
        try:
            if soft_seconds:
                signal.setitimer(signal.ITIMER_PROF, soft_seconds)
            try:
                compiled = _compile_job(job)
            finally:
                signal.setitimer(signal.ITIMER_PROF, 0)
            conn.send(("ok", pickle.dumps(compiled, protocol=5)))
        except _PastBudget:
            conn.send(("slow", soft_seconds))
        except MemoryError:
            try:
                conn.send(("error", ("MemoryError", "out of memory")))
            except MemoryError:  # not even room to say so: the pool sees a dead worker (a 400 all the same)
                os._exit(1)
        except BaseException as error:  # the student's code may raise anything
            conn.send(("error", (type(error).__name__, str(error)[:2000])))


def _compile_job(job: CompileJob) -> tuple[str, Any]:
    if job.sentence is not None:
        stack = _compile_stack(job)
        if stack is not None:
            return "stack", stack
    return "regex", _compile(job.regex, job.lab08)  # json_object while lab-09 is a stub: the flat object


# One token and EOS: the labs' pieces are tried on it once, so a stub says so here, before any reply starts.
_TINY = Vocabulary(tokens=[b"{", None], eos_token_id=1)


def _compile(regex: str, lab_path: str) -> tuple[Any, ...]:
    """lab-08's byte automaton as plain data; its masker tried once on a one-token vocabulary."""
    from mini_vllm.grammars.grammar import regex_to_chars
    from mini_vllm.labs import load_lab

    lab = load_lab("lab-08", lab_path)
    automaton = lab.lift_to_bytes(regex_to_chars(regex))
    lab.TokenMasker(automaton, _TINY, token_trie(_TINY)).mask(automaton.start)
    return _automaton_data(automaton)


def _automaton_data(automaton: Any) -> tuple[int, list[bool], list[bytes]]:
    """A byte automaton as plain data: its start, which states accept, each state's row of 256 next states."""
    states = automaton.num_states
    table = getattr(automaton, "table", None)
    if isinstance(automaton, ByteAutomaton) and isinstance(table, list):
        rows = [array("i", row).tobytes() for row in table]
        accepting = [bool(a) for a in automaton.accepting]
    else:  # a student's own automaton type: read it through its interface
        rows = [array("i", [automaton.step(s, b) for b in range(256)]).tobytes() for s in range(states)]
        accepting = [bool(automaton.is_accepting(s)) for s in range(states)]
    return int(automaton.start), accepting, rows


def _compile_stack(job: CompileJob) -> tuple[Any, ...] | None:
    """lab-09's grammar for ``job.sentence``, each lexeme lifted to bytes by lab-08; None when lab-09 is still the
    starter's stub and the job has a regex to fall back to (its NotImplementedError otherwise)."""
    from mini_vllm.grammars.grammar import regex_to_chars
    from mini_vllm.grammars.schema_grammar import sentence_grammar
    from mini_vllm.labs import load_lab

    assert job.sentence is not None
    grammar = sentence_grammar(job.sentence)
    lab08 = load_lab("lab-08", job.lab08)
    lexemes = [(lexeme.name, lexeme.regex, *_automaton_data(lab08.lift_to_bytes(regex_to_chars(lexeme.regex))))
               for lexeme in grammar.lexemes]
    data = (grammar.start, [(rule.lhs, rule.rhs) for rule in grammar.rules], lexemes)
    try:
        _probe(load_lab("lab-09", job.lab09), rebuild_grammar(data))
    except NotImplementedError:
        if job.regex:
            return None
        raise
    return data


def _probe(lab09: Any, grammar: Any) -> None:
    """lab-09's pieces once, on a vocabulary of one token: a stub says so here, before any reply starts."""
    matcher = lab09.ByteMatcher(grammar, lab09.EarleyParser(grammar))  # in task order: the first stub is named
    lab09.SplitMasker(grammar, _TINY, token_trie(_TINY)).mask(matcher)


class _Worker:
    def __init__(self, memory_bytes: int) -> None:
        context = multiprocessing.get_context("spawn")
        self.conn, child = context.Pipe()
        self.process = context.Process(target=_worker_main, args=(child, memory_bytes), daemon=True,
                                       name="mini_vllm-grammar-compile")
        self.process.start()
        child.close()

    def run(self, job: CompileJob, cpu_seconds: int, soft_seconds: float = 0) -> tuple[str, Any]:
        """In a daemon thread: send the job, wait for its answer (EOF if the worker was killed)."""
        try:
            self.conn.send(("compile", job, cpu_seconds, soft_seconds))
            return self.conn.recv()  # type: ignore[no-any-return]
        except (EOFError, OSError, BrokenPipeError):
            return ("died", self.process.exitcode)

    def kill(self) -> None:
        if self.process.is_alive():
            self.process.kill()
        self.process.join(5)
        self.conn.close()


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
    _idle: list[_Worker] = field(default_factory=list)
    _live: set[_Worker] = field(default_factory=set)
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

    def _spawn(self) -> _Worker:
        worker = _Worker(self.memory_bytes)
        with self._lock:
            self._live.add(worker)
        return worker

    def _discard(self, worker: _Worker) -> None:
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
