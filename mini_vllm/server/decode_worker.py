"""Constrained decoding in a process of its own: the toy model's scores and lab-08's sampler, off the server's GIL.

A constrained token is pure Python over the whole vocabulary (on Tekken, scores for 131,072
tokens and a masked choice among as many). In a thread of the server's process it would still
share the GIL with the event loop, and eight such streams stretched another stream's gaps
several times over. So the choice runs in one spawned process, the place a GPU worker holds
in vLLM: the server sends a request's grammar (plain data, once) and then, per token, the
reply's ids so far; the worker answers the token id. Two daemon threads carry the messages
(a send of a big grammar never blocks the loop); a session ends with ``close``.

Work per vocabulary is done here once: the vocabulary arrives once, and its trie (``token_trie``, about
a second of Python on Tekken) is built once and shared by every grammar's masker. A grammar arrives
once too (its key is its hash; the server and this process keep the same list of :data:`GRAMMARS`), and
its masker is made at its first request and kept, :data:`MASKERS` of them: lab-08's ``TokenMasker``
asked for a state's mask at the state's first visit (``lazy_masks``: cached as arrays, bounded in
bytes), or, for a grammar with a stack (``stack_decoding``), lab-09's ``SplitMasker``, with its own
parser and matcher per reply under lab-08's sampler. A new state's first mask (a tenth of a second
inside a Tekken string, in Python) is computed here, and meanwhile this process answers no one.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import itertools
import multiprocessing
import pickle
import queue
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from mini_vllm.api.errors import ApiError
from mini_vllm.labtypes.lab08 import TOOL_CALL_START, TokenTrie, Vocabulary, token_trie
from mini_vllm.server.lazy_masks import LazyMasks, MaskCache, rebuild_automaton
from mini_vllm.server.stack_decoding import StackSession, rebuild_grammar

MASKERS = 8  # grammars whose maskers are kept (a lab-09 masker holds the splits it has met; lab-08's, nothing)
GRAMMARS = 16  # compiled grammars kept here, each sent once (the server keeps the same list: ``_Sent``)
# The decode process's address space (RLIMIT_AS), enforced by the OS: Tekken's vocabulary, its trie and the
# toy model take about 300 MiB of it. A reply whose masks would pass it is a 503 naming the limit (the caches
# are dropped, so the process goes on serving), never the process's death.
MEMORY_BYTES = 1024**3


class _VocabularyTokenizer:
    """Just what the toy model's scoring mode reads of a tokenizer, rebuilt from lab-08's Vocabulary."""

    def __init__(self, tokens: list[bytes], special: list[int], eos: int) -> None:
        self._tokens = tokens
        self.all_special_ids = special
        self.eos_token_id = eos
        self.vocab_size = len(tokens)

    def decode_single_token_bytes(self, token_id: int) -> bytes:
        return self._tokens[token_id]


class _Sent:
    """The grammars the decode process holds, least recently used first: the server and the process each keep
    one, and since both see the same messages in the same order, they agree on what is there."""

    def __init__(self) -> None:
        self.keys: OrderedDict[str, None] = OrderedDict()

    def use(self, key: str) -> tuple[bool, list[str]]:
        """Whether ``key`` is new here, and the keys it pushes out."""
        if key in self.keys:
            self.keys.move_to_end(key)
            return False, []
        self.keys[key] = None
        out = []
        while len(self.keys) > GRAMMARS:
            out.append(self.keys.popitem(last=False)[0])
        return True, out


@dataclass
class _Process:
    """What the decode process keeps: vocabularies (each with its trie, built once), grammars, maskers, masks."""

    vocabularies: dict[str, tuple[Vocabulary, TokenTrie, Any]] = field(default_factory=dict)
    grammars: dict[str, bytes] = field(default_factory=dict)
    sent: _Sent = field(default_factory=_Sent)
    maskers: OrderedDict[tuple[str, ...], tuple[Any, Any]] = field(default_factory=OrderedDict)
    masks: MaskCache = field(default_factory=MaskCache)

    def open(self, grammar_key: str, vocab_key: str, lab_paths: tuple[str, str], thinking: bool,
             tool_call: bool) -> Any:
        """The sampler of one reply: lab-08's over lazy masks, or (a stack) over lab-09's matcher and masker."""
        from mini_vllm.labs import load_lab

        vocab, trie, _ = self.vocabularies[vocab_key]
        lab08 = load_lab("lab-08", lab_paths[0])
        implicit_end = TOOL_CALL_START if tool_call else None
        key = (grammar_key, vocab_key, *lab_paths)
        if key not in self.maskers:  # a grammar's first request here: made once, then kept for the next ones
            kind, data = pickle.loads(self.grammars[grammar_key])
            if kind == "regex":
                automaton = rebuild_automaton(data)
                made: tuple[Any, Any] = (automaton, LazyMasks("\0".join(key), lab08, automaton, vocab, trie,
                                                              self.masks))
            else:
                grammar = rebuild_grammar(data)
                made = (grammar, load_lab("lab-09", lab_paths[1]).SplitMasker(grammar, vocab, trie))
            self.maskers[key] = made
            while len(self.maskers) > MASKERS:
                _, (_, old) = self.maskers.popitem(last=False)
                if isinstance(old, LazyMasks):
                    self.masks.drop(old.key)
        self.maskers.move_to_end(key)
        held, masker = self.maskers[key]
        if isinstance(masker, LazyMasks):
            return lab08.StructuredSampler(held, vocab, masker.allowed_at, thinking=thinking,
                                           implicit_end=implicit_end)
        return StackSession(lab08, load_lab("lab-09", lab_paths[1]), held, masker, vocab, thinking, implicit_end)


def _worker_main(conn: Any, memory_bytes: int) -> None:
    import gc
    import resource

    from mini_vllm.toy_model import ToyModel

    resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    here = _Process()

    def out_of_memory() -> None:
        """Drop what can be made again (maskers, masks), so the replies that follow have room."""
        here.maskers.clear()
        here.masks = MaskCache(here.masks.bound)
        gc.collect()

    sessions: dict[int, tuple[Any, Any, str, bool]] = {}
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return
        kind = message[0]
        if kind == "vocab":
            _, key, vocab, raw_tokens, special, seed = message
            shim = _VocabularyTokenizer(raw_tokens, special, vocab.eos_token_id)
            # The trie once per vocabulary, here: every grammar's masker (lab-08's and lab-09's) walks this one.
            here.vocabularies[key] = (vocab, token_trie(vocab), ToyModel(shim, seed))  # type: ignore[arg-type]
        elif kind == "grammar":
            _, key, blob = message
            _, out = here.sent.use(key)
            here.grammars[key] = blob
            for old in out:
                here.grammars.pop(old, None)
        elif kind == "open":
            _, sid, vocab_key, grammar_key, lab_paths, user_message, thinking, tool_call = message
            model = here.vocabularies[vocab_key][2]
            here.sent.use(grammar_key)
            try:
                sampler = here.open(grammar_key, vocab_key, lab_paths, thinking, tool_call)
                sessions[sid] = (sampler, model, user_message, thinking)
            except MemoryError as error:
                out_of_memory()
                sessions[sid] = (error, model, user_message, thinking)
            except BaseException as error:  # the student's constructor may raise anything: the first token says so
                sessions[sid] = (error, model, user_message, thinking)
        elif kind == "next":
            _, request_id, sid, ids = message
            try:
                sampler, model, user_message, thinking = sessions[sid]
                if isinstance(sampler, BaseException):
                    raise sampler
                token = int(sampler.choose(model.scores(user_message, ids, opened_thought=thinking)))
                conn.send(("token", request_id, token))
            except MemoryError:
                sessions.pop(sid, None)
                out_of_memory()
                conn.send(("error", request_id, "MemoryError", str(memory_bytes // 1024**2)))
            except BaseException as error:  # the student's sampler may raise anything
                conn.send(("error", request_id, type(error).__name__, str(error)[:2000]))
        elif kind == "close":
            sessions.pop(message[1], None)
        elif kind == "stats":  # what this process holds and has computed (tests count work with it)
            conn.send(("token", message[1], {"masks_computed": here.masks.computed, "mask_bytes": here.masks.nbytes,
                                             "maskers": len(here.maskers), "grammars": len(here.grammars),
                                             "tries": len(here.vocabularies)}))


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
        self._sent = _Sent()
        self._ids = itertools.count()
        self.memory_bytes = MEMORY_BYTES
        self.grammars_sent = 0  # grammars handed to the process (a test counts: once per grammar, not per request)

    def _start(self) -> None:
        context = multiprocessing.get_context("spawn")
        conn, child = context.Pipe()
        self._process = context.Process(target=_worker_main, args=(child, self.memory_bytes), daemon=True,
                                        name="mini_vllm-decode")
        self._process.start()
        child.close()
        self._vocabularies = set()
        self._sent = _Sent()
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
