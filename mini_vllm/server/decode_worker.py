"""Constrained decoding in a process of its own: the toy model's scores and lab-08's sampler, off the server's GIL.

A constrained token is pure Python over the whole vocabulary (on Tekken, scores for 131,072
tokens and a masked choice among as many). In a thread of the server's process it would still
share the GIL with the event loop, and eight such streams stretched another stream's gaps
several times over. So the choice runs in one spawned process, the place a GPU worker holds
in vLLM: the server sends a request's grammar (plain data, once) and then, per token, the
reply's ids so far; the worker answers the token id. Two daemon threads carry the messages
(a send of a big grammar never blocks the loop); a session ends with ``close``.

A grammar with a stack (``stack_decoding``) is served here too: lab-09's ``SplitMasker`` is made
once per grammar and vocabulary and kept for the next requests, :data:`MASKERS` of them; each reply
gets its own parser and matcher, under lab-08's sampler. Its trie (about 2 s of CPU on Tekken) and
each lexer state's first split (up to half a second on Tekken) are computed here, and meanwhile this
process answers no one: the price of masks computed as the reply goes rather than indexed beforehand.
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
from array import array
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from mini_vllm.labtypes.lab08 import TOOL_CALL_START, ByteAutomaton, Vocabulary
from mini_vllm.server.stack_decoding import StackSession, rebuild_grammar

MASKERS = 4  # lab-09 maskers kept (each holds a trie of its vocabulary and the splits it has met)


@dataclass
class CompiledIndex:
    """A ``TokenIndex`` as plain data: state -> which distinct mask."""

    masks: list[array[int]]
    mask_of: array[int]

    def allowed(self, state: int) -> array[int]:
        return self.masks[self.mask_of[state]]


@dataclass
class Rebuilt:
    automaton: ByteAutomaton
    index: CompiledIndex


def rebuild(data: tuple[Any, ...]) -> Rebuilt:
    start, accepting, rows, masks, mask_of = data

    def ints(raw: bytes) -> array[int]:
        out = array("i")
        out.frombytes(raw)
        return out

    automaton = ByteAutomaton(start=start, accepting=accepting, table=[ints(r) for r in rows])  # type: ignore[misc]
    return Rebuilt(automaton, CompiledIndex([ints(m) for m in masks], ints(mask_of)))


class _VocabularyTokenizer:
    """Just what the toy model's scoring mode reads of a tokenizer, rebuilt from lab-08's Vocabulary."""

    def __init__(self, tokens: list[bytes], special: list[int], eos: int) -> None:
        self._tokens = tokens
        self.all_special_ids = special
        self.eos_token_id = eos
        self.vocab_size = len(tokens)

    def decode_single_token_bytes(self, token_id: int) -> bytes:
        return self._tokens[token_id]


def _open(blob: bytes, vocab_key: str, vocab: Vocabulary, lab_paths: tuple[str, str], thinking: bool,
          tool_call: bool, maskers: OrderedDict[tuple[str, ...], tuple[Any, Any]]) -> Any:
    """The sampler of one reply: lab-08's over its compiled index, or (a stack) over lab-09's matcher and masker."""
    from mini_vllm.labs import load_lab

    kind, data = pickle.loads(blob)
    lab08 = load_lab("lab-08", lab_paths[0])
    implicit_end = TOOL_CALL_START if tool_call else None
    if kind == "regex":
        compiled = rebuild(data)
        return lab08.StructuredSampler(compiled.automaton, vocab, compiled.index.allowed, thinking=thinking,
                                       implicit_end=implicit_end)
    lab09 = load_lab("lab-09", lab_paths[1])
    key = (hashlib.blake2b(blob, digest_size=16).hexdigest(), vocab_key, lab_paths[1])
    if key not in maskers:
        grammar = rebuild_grammar(data)
        maskers[key] = (grammar, lab09.SplitMasker(grammar, vocab))
        while len(maskers) > MASKERS:
            maskers.popitem(last=False)
    maskers.move_to_end(key)
    grammar, masker = maskers[key]
    return StackSession(lab08, lab09, grammar, masker, vocab, thinking, implicit_end)


def _worker_main(conn: Any) -> None:
    from mini_vllm.toy_model import ToyModel

    vocabularies: dict[str, tuple[Vocabulary, ToyModel]] = {}
    sessions: dict[int, tuple[Any, ToyModel, str, bool]] = {}
    maskers: OrderedDict[tuple[str, ...], tuple[Any, Any]] = OrderedDict()
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return
        kind = message[0]
        if kind == "vocab":
            _, key, vocab, raw_tokens, special, seed = message
            shim = _VocabularyTokenizer(raw_tokens, special, vocab.eos_token_id)
            vocabularies[key] = (vocab, ToyModel(shim, seed))  # type: ignore[arg-type]  # what scores() reads
        elif kind == "open":
            _, sid, vocab_key, blob, lab_paths, user_message, thinking, tool_call = message
            vocab, model = vocabularies[vocab_key]
            try:
                sampler = _open(blob, vocab_key, vocab, lab_paths, thinking, tool_call, maskers)
                sessions[sid] = (sampler, model, user_message, thinking)
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
            except BaseException as error:  # the student's sampler may raise anything
                conn.send(("error", request_id, type(error).__name__, str(error)[:2000]))
        elif kind == "close":
            sessions.pop(message[1], None)


def _settle(loop: asyncio.AbstractEventLoop, future: asyncio.Future[int], message: tuple[Any, ...]) -> None:
    """Hand a worker's answer to the coroutine waiting for it, on its own loop."""
    def settle() -> None:
        if future.done():
            return
        if message[0] == "token":
            future.set_result(message[2])
        elif message[2] == "NotImplementedError":
            future.set_exception(NotImplementedError(message[3]))
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
        self._ids = itertools.count()

    def _start(self) -> None:
        context = multiprocessing.get_context("spawn")
        conn, child = context.Pipe()
        self._process = context.Process(target=_worker_main, args=(child,), daemon=True, name="mini_vllm-decode")
        self._process.start()
        child.close()
        self._vocabularies = set()
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
        with self._lock:
            if self._process is None or not self._process.is_alive():
                self._start()
            if vocab_key not in self._vocabularies:
                self._outbox.put(("vocab", vocab_key, vocab, *raw))
                self._vocabularies.add(vocab_key)
            sid = next(self._ids)
            self._outbox.put(("open", sid, vocab_key, blob, lab_paths, user_message, thinking, tool_call))
        return sid

    async def next(self, sid: int, ids: Sequence[int]) -> int:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[int] = loop.create_future()
        request_id = next(self._ids)
        with self._lock:
            self._pending[request_id] = (loop, future)
            self._outbox.put(("next", request_id, sid, list(ids)))
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
