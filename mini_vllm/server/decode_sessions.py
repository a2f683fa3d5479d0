"""The decode process's side: what it keeps, and one thread per reply, so no reply waits on another's mask.

A reply runs the student's code here at every token (lab-08's sampler, lab-09's matcher and parser) and,
in the student's release, the student's mask walk over the whole vocabulary (a tenth of a second to
seconds on Tekken; the course's mask engine takes milliseconds). Run in the process's one loop, a slow one
held every other reply's next token until it finished. So each reply (a session) runs in a thread of its
own, and the interpreter time-slices them (every :data:`SWITCH_S` at most): a reply whose masks are
cached keeps its pace beside one that computes a mask. A session whose client left is stopped where it
stands: ``close`` raises :class:`Cancelled` inside its thread (``PyThreadState_SetAsyncExc``), so its CPU
stops within a slice, and the masker it was inside (the student's code, perhaps half way through filling a cache)
is dropped, to be made again by the next request that needs it.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import pickle
import socket
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from mini_vllm.labtypes.lab08 import TOOL_CALL_START, TokenTrie, Vocabulary, token_trie
from mini_vllm.server.decode_wire import error_bytes, read_request, token_bytes
from mini_vllm.server.lazy_masks import LazyMasks, MaskCache, engine_present, rebuild_automaton
from mini_vllm.server.stack_decoding import StackSession, rebuild_grammar

MASKERS = 8  # grammars whose maskers are kept (a lab-09 masker holds the splits it has met; lab-08's, nothing)
GRAMMARS = 16  # compiled grammars kept here, each sent once (the server keeps the same list: ``Sent``)
M_ARENA_MAX = -8  # glibc's mallopt parameter
# Each session thread's stack, counted by RLIMIT_AS: 100 concurrent replies took 790 MiB of address space with 4 MiB
# stacks (Tekken, one cached schema). Python 3.11 calls Python without the C stack; a lab's walk recurses a token deep.
STACK_BYTES = 2 * 1024**2
SWITCH_S = 0.001  # the interpreter's time slice here: how long a mask may hold the GIL before another reply runs


class Cancelled(BaseException):
    """Raised inside a session's thread when its client left (a BaseException: the student's code never
    catches it with ``except Exception``)."""


class VocabularyTokenizer:
    """Just what the toy model's scoring mode reads of a tokenizer, rebuilt from lab-08's Vocabulary."""

    def __init__(self, tokens: list[bytes], special: list[int], eos: int) -> None:
        self._tokens = tokens
        self.all_special_ids = special
        self.eos_token_id = eos
        self.vocab_size = len(tokens)

    def decode_single_token_bytes(self, token_id: int) -> bytes:
        return self._tokens[token_id]


class Sent:
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
class Process:
    """What the decode process keeps: vocabularies (each with its trie, built once), grammars, maskers, masks."""

    vocabularies: dict[str, tuple[Vocabulary, TokenTrie, Any]] = field(default_factory=dict)
    grammars: dict[str, bytes] = field(default_factory=dict)
    sent: Sent = field(default_factory=Sent)
    maskers: OrderedDict[tuple[str, ...], tuple[Any, Any]] = field(default_factory=OrderedDict)
    masks: MaskCache = field(default_factory=MaskCache)
    lock: threading.Lock = field(default_factory=threading.Lock)  # maskers and masks: sessions share them
    drops: int = 0  # maskers dropped by a cancelled session
    shortages: int = 0  # MemoryErrors met

    def add_vocabulary(self, key: str, vocab: Vocabulary, raw_tokens: list[bytes], special: list[int],
                       seed: int) -> None:
        from mini_vllm.toy_model import ToyModel

        shim = VocabularyTokenizer(raw_tokens, special, vocab.eos_token_id)
        # The trie once per vocabulary, here: every grammar's masker (lab-08's and lab-09's) walks this one.
        trie = token_trie(vocab)
        if engine_present():
            from mini_vllm.server.mask_engine import trie_levels

            trie_levels(trie, len(vocab))  # the mask engine's view of it, once too
        self.vocabularies[key] = (vocab, trie, ToyModel(shim, seed))  # type: ignore[arg-type]

    def open(self, grammar_key: str, vocab_key: str, lab_paths: tuple[str, str], thinking: bool,
             tool_call: bool) -> tuple[Any, tuple[str, ...]]:
        """The sampler of one reply (lab-08's over lazy masks, or over lab-09's matcher and masker) and its
        masker's key."""
        from mini_vllm.labs import load_lab

        vocab, trie, _ = self.vocabularies[vocab_key]
        lab08 = load_lab("lab-08", lab_paths[0])
        implicit_end = TOOL_CALL_START if tool_call else None
        key = (grammar_key, vocab_key, *lab_paths)
        with self.lock:
            found = self.maskers.get(key)
            if found is not None:
                self.maskers.move_to_end(key)
        if found is None:  # a grammar's first request here: made once, then kept for the next ones
            made: tuple[Any, Any]
            kind, data = pickle.loads(self.grammars[grammar_key])
            if kind == "regex":
                automaton = rebuild_automaton(data)
                made = (automaton, LazyMasks("\0".join(key), data, automaton, lab08, vocab, trie, self.masks,
                                             self.lock))
            else:
                grammar = rebuild_grammar(data)
                if engine_present():
                    from mini_vllm.server.mask_engine import trie_levels
                    from mini_vllm.server.stack_masks import SplitEngine

                    made = (grammar, SplitEngine(data[2], vocab, trie, trie_levels(trie, len(vocab))))
                else:
                    made = (grammar, load_lab("lab-09", lab_paths[1]).SplitMasker(grammar, vocab, trie))
            found = made
            with self.lock:
                self.maskers[key] = found
                while len(self.maskers) > MASKERS:
                    self._forget(self.maskers.popitem(last=False)[1][1])
        held: Any = found[0]
        masker = found[1]
        if isinstance(masker, LazyMasks):
            sampler = lab08.StructuredSampler(held, vocab, masker.allowed_at, thinking=thinking,
                                              implicit_end=implicit_end)
        else:
            sampler = StackSession(lab08, load_lab("lab-09", lab_paths[1]), held, masker, vocab, thinking,
                                   implicit_end)
        return sampler, key

    def drop(self, key: tuple[str, ...]) -> None:
        """Forget one masker (a cancelled session may have left it half way through its own caches)."""
        self.drops += 1
        with self.lock:
            found = self.maskers.pop(key, None)
            if found is not None:
                self._forget(found[1])

    def _forget(self, masker: Any) -> None:
        if isinstance(masker, LazyMasks):
            self.masks.drop(masker.key)

    def out_of_memory(self) -> None:
        """Drop what can be made again (maskers, masks), so the replies that follow have room."""
        self.shortages += 1
        with self.lock:
            self.maskers.clear()
            self.masks.clear()
        gc.collect()


class Session(threading.Thread):
    """One reply's choices, in a thread of its own reading its own socket (``decode_wire``): a request there
    per token, answered there; ``cancel`` when its client left."""

    def __init__(self, here: Process, sampler: Any, key: tuple[str, ...] | None, model: Any, user_message: str,
                 thinking: bool, sock: socket.socket, memory_mib: int) -> None:
        super().__init__(daemon=True, name="mini_vllm-decode-session")
        self.here, self.sampler, self.key, self.model = here, sampler, key, model
        self.user_message, self.thinking, self.sock, self.memory_mib = user_message, thinking, sock, memory_mib
        self.ids: list[int] = []  # the reply so far: each request brings only the ids past what this holds
        self.guard = threading.Lock()  # over ``choosing``: cancel raises inside a choice, never after it
        self.choosing = False
        self.cancelled = False

    def run(self) -> None:
        try:
            while not self.cancelled and (request := read_request(self.sock)) is not None:
                self._choose(*request)
        except (Cancelled, OSError):  # cancelled, or the server's end is gone: nobody waits for this reply
            pass
        finally:
            self.sock.close()

    def _send(self, data: bytes) -> None:
        with contextlib.suppress(OSError):  # the server closed its end (the reply ended): nobody reads it
            self.sock.sendall(data)

    def _choose(self, known: int, new: list[int]) -> None:
        ids = self.ids
        ids[known:] = new
        try:
            if isinstance(self.sampler, BaseException):
                raise self.sampler
            with self.guard:
                self.choosing = True
            try:
                # The next step's noise, drawn in the model's drawing thread beside this step's scores and choice
                # and the server's turn (the same values; this step's was drawn there during the last one).
                self.model.draw_ahead(self.user_message, len(ids) + 1)
                scores = self.model.scores(self.user_message, ids, opened_thought=self.thinking)
                token = int(self.sampler.choose(scores))
            finally:
                with self.guard:
                    self.choosing = False
            self._send(token_bytes(token))
        except Cancelled:
            raise
        except MemoryError:
            self.here.out_of_memory()
            self._send(error_bytes("MemoryError", str(self.memory_mib)))
        except BaseException as error:  # the student's sampler may raise anything
            self._send(error_bytes(type(error).__name__, str(error)[:2000]))

    def cancel(self) -> None:
        """Stop this reply: between choices, at once (its socket shut down: the read waiting there ends); inside
        one, by raising Cancelled in the thread."""
        self.cancelled = True
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        with self.guard:
            if not self.choosing or self.ident is None:
                return
            ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(self.ident), ctypes.py_object(Cancelled))
        if self.key is not None:
            self.here.drop(self.key)


def worker_main(conn: Any, memory_bytes: int) -> None:
    """The decode process: messages in order from the server; each reply's choices in its own thread."""
    import resource
    import sys
    from multiprocessing.reduction import recv_handle

    # Address space is what RLIMIT_AS counts: glibc gives each new thread a malloc arena of 64 MiB of it, and each
    # thread 8 MiB of stack. A few arenas and a smaller stack (the labs' walks recurse at most a token deep).
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").mallopt(M_ARENA_MAX, 2)
    threading.stack_size(STACK_BYTES)
    resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    sys.setswitchinterval(SWITCH_S)
    here = Process()
    sessions: dict[int, Session] = {}
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return
        kind = message[0]
        if kind == "vocab":
            here.add_vocabulary(*message[1:])
        elif kind == "grammar":
            _, grammar_key, blob = message
            _, out = here.sent.use(grammar_key)
            here.grammars[grammar_key] = blob
            for old in out:
                here.grammars.pop(old, None)
        elif kind == "open":
            _, sid, vocab_key, grammar_key, lab_paths, user_message, thinking, tool_call = message
            sock = socket.socket(fileno=recv_handle(conn))  # the session's socket, sent right after its ``open``
            sock.setblocking(True)
            here.sent.use(grammar_key)
            sampler: Any
            key: tuple[str, ...] | None = None
            try:
                sampler, key = here.open(grammar_key, vocab_key, lab_paths, thinking, tool_call)
            except MemoryError as error:
                here.out_of_memory()
                sampler = error
            except BaseException as error:  # the student's constructor may raise anything: the first token says so
                sampler = error
            session = sessions[sid] = Session(here, sampler, key, here.vocabularies[vocab_key][2], user_message,
                                              thinking, sock, memory_bytes // 1024**2)
            session.start()
        elif kind == "close":
            closed = sessions.pop(message[1], None)
            if closed is not None:
                closed.cancel()
        elif kind == "stats":  # what this process holds and has computed (tests count work with it)
            conn.send(("token", message[1], {"masks_computed": here.masks.computed, "mask_bytes": here.masks.nbytes,
                                        "maskers": len(here.maskers), "grammars": len(here.grammars),
                                        "tries": len(here.vocabularies), "sessions": len(sessions),
                                        "drops": here.drops, "shortages": here.shortages,
                                        "cancelled": sum(1 for t in threading.enumerate()
                                                         if isinstance(t, Session) and t.cancelled)}))
