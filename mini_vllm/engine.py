"""The teaching engine: runs requests concurrently, k tokens per step (default 1), with abort.

It stands where vLLM's ``AsyncLLM`` stands: the server hands it a prompt and sampling
parameters and reads back token ids. It knows nothing about text; turning ids into
text (and noticing stop strings and tool calls) is the output pipeline's job, lab-02.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import weakref
from collections import deque
from collections.abc import AsyncIterator, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from mini_vllm.kv_pool import BlockPool, NoFreeBlocks
from mini_vllm.sampling import SamplingParams
from mini_vllm.toy_model import ToyModel

MAX_MODEL_LEN = 32768  # the toy model's context window, in tokens (a prompt and its reply together)
RECENT_IDS = 1000  # how many finished and aborted request ids the statistics remember (the counts are exact)


class EngineOutput(NamedTuple):
    """One engine step: the token ids it produced (several when a step emits k tokens, as a
    speculative decoder does); ``finish_reason`` is set on the last step ("stop" at EOS,
    "length" at max_tokens). A NamedTuple: one is made per step, and a frozen dataclass costs
    several times more to build."""

    token_ids: tuple[int, ...]
    finish_reason: str | None = None


@dataclass
class EngineStats:
    """Counts of finished and aborted requests, and the most recent ids of each (a server runs for weeks:
    a list of every id would grow by one string per request forever)."""

    num_finished: int = 0
    num_aborted: int = 0
    finished: deque[str] = field(default_factory=lambda: deque(maxlen=RECENT_IDS))
    aborted: deque[str] = field(default_factory=lambda: deque(maxlen=RECENT_IDS))

    def record(self, request_id: str, aborted: bool) -> None:
        if aborted:
            self.num_aborted += 1
            self.aborted.append(request_id)
        else:
            self.num_finished += 1
            self.finished.append(request_id)


class Engine:
    def __init__(self, model: ToyModel, pool: BlockPool | None = None, token_delay_s: float = 0.0,
                 tokens_per_step: int = 1, max_model_len: int = MAX_MODEL_LEN) -> None:
        if tokens_per_step < 1:
            raise ValueError(f"tokens_per_step must be >= 1, got {tokens_per_step}")
        self.model = model
        self.tokens_per_step = tokens_per_step
        self.tokenizer = model.tokenizer
        self.pool = pool or BlockPool()
        self.token_delay_s = token_delay_s
        self.stats = EngineStats()
        self.max_model_len = max_model_len  # prompt + reply, in tokens: the context window
        self._running: set[str] = set()
        self._waiting: deque[tuple[str, int, asyncio.Future[None]]] = deque()  # FIFO: (id, tokens, admitted)

    @property
    def max_token_bytes(self) -> int:
        """The most bytes one token stands for: a prompt of B bytes makes at least B / this many tokens."""
        return max_token_bytes(self.tokenizer)  # read once per tokenizer, kept there

    @property
    def running(self) -> frozenset[str]:
        return frozenset(self._running)

    @property
    def capacity_tokens(self) -> int:
        """The most tokens one request can ever hold: the context window, or the whole pool if that is smaller."""
        return min(self.max_model_len, self.pool.num_blocks * self.pool.block_size)

    @property
    def num_waiting(self) -> int:
        return len(self._waiting)

    def admit(self, request_id: str, num_prompt_tokens: int, max_tokens: int = 1) -> None:
        """Take the blocks for the prompt and ``max_tokens`` more now, or raise NoFreeBlocks.

        With its reply's blocks reserved up front, a request can never be cut short by others
        using the pool (``generate`` takes more only for a request admitted with fewer).
        """
        self.pool.reserve(request_id, num_prompt_tokens + max_tokens)
        self._running.add(request_id)

    async def wait_to_admit(self, request_id: str, num_prompt_tokens: int, max_tokens: int) -> None:
        """:meth:`admit`, waiting in line (first come, first served) while the pool is too full.

        The caller checks first that the request fits the pool at all (``capacity_tokens``): one
        that never could would wait forever. Cancelling the wait leaves the line, holding nothing.
        """
        needed = num_prompt_tokens + max_tokens
        if not self._waiting and self.pool.try_reserve(request_id, needed):
            self._running.add(request_id)
            return
        admitted: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = (request_id, needed, admitted)
        self._waiting.append(entry)
        try:
            await admitted
        except asyncio.CancelledError:
            if entry in self._waiting:
                self._waiting.remove(entry)
            elif admitted.done() and not admitted.cancelled():  # admitted just as it was cancelled: give it back
                self._release(request_id, aborted=True)
            raise

    def _admit_waiting(self) -> None:
        """Admit the requests at the head of the line, in order, while their blocks are free."""
        while self._waiting:
            request_id, needed, admitted = self._waiting[0]
            if admitted.done():  # cancelled while waiting
                self._waiting.popleft()
                continue
            try:
                self.pool.reserve(request_id, needed)
            except NoFreeBlocks:
                return  # the head waits for more blocks; nobody overtakes it
            self._waiting.popleft()
            self._running.add(request_id)
            admitted.set_result(None)

    async def generate(self, request_id: str, prompt_ids: Sequence[int], user_message: str,
                       params: SamplingParams,
                       choose: Callable[[Sequence[int]], Any] | None = None) -> AsyncIterator[EngineOutput]:
        """Stream the reply's token ids. Leaving early (break, cancellation) aborts the request.

        A request admitted with its ``max_tokens`` reserved (as the server admits them) already
        holds every block it can use. One started here without admission holds only its prompt
        and first token: before handing out a token the engine makes room for the next, and if
        the pool is full, this token is the last, with finish reason "length".
        """
        if request_id not in self._running:
            self.admit(request_id, len(prompt_ids))
        # The scripted reply, or (structured outputs, lab-08) a reply chosen token by token under a grammar.
        reply = scripted(self.model.reply_ids(user_message, prompt_ids)) if choose is None else \
            chosen(choose, self.tokenizer)
        # Read once: this loop runs for every token of every request, and is the server's hot path.
        eos, delay, per_step, pool = self.tokenizer.eos_token_id, self.token_delay_s, self.tokens_per_step, self.pool
        room = pool.blocks_held(request_id) * pool.block_size  # tokens the held blocks can take
        finished = False
        step_ids: list[int] = []
        try:
            count = 0
            async for token_id in reply:
                count += 1
                needed = len(prompt_ids) + min(count + 1, params.max_tokens)  # this token and room for the next
                if needed > room and pool.try_reserve(request_id, needed):  # a new block, only at a boundary
                    room = pool.blocks_held(request_id) * pool.block_size
                if token_id == eos:
                    reason: str | None = "stop"
                elif count >= params.max_tokens or needed > room:
                    reason = "length"
                else:
                    reason = None
                step_ids.append(token_id)
                if reason is None and len(step_ids) < per_step:
                    continue
                # Yield to the event loop every step, so other requests and disconnects get a turn.
                await asyncio.sleep(delay)
                finished = reason is not None
                yield EngineOutput(tuple(step_ids), reason)
                step_ids = []
                if finished:
                    return
        finally:
            self._release(request_id, aborted=not finished)

    def abort(self, request_id: str) -> None:
        """Stop a request now and free its blocks (the server calls this on a stop string or a disconnect)."""
        if request_id in self._running:
            self._release(request_id, aborted=True)

    def _release(self, request_id: str, aborted: bool) -> None:
        if request_id not in self._running:
            return
        self._running.discard(request_id)
        self.pool.free(request_id)
        self.stats.record(request_id, aborted)
        if self._waiting:
            self._admit_waiting()


async def scripted(ids: Sequence[int]) -> AsyncIterator[int]:
    for token_id in ids:
        yield token_id


# Constrained decoding's choice (the model's scores over the whole vocabulary, the grammar's mask, the
# sampler's pick) is pure Python: on Tekken tens of milliseconds a token. A plain function runs here, one
# choice at a time, never on the event loop; the server passes a coroutine function instead, which
# runs the choice in a process of its own (``mini_vllm.server.decode_worker``), off the loop's GIL too.
DECODE_THREAD = ThreadPoolExecutor(max_workers=1, thread_name_prefix="mini_vllm-decode")


async def chosen(choose: Callable[[Sequence[int]], Any], tokenizer: object) -> AsyncIterator[int]:
    """Token ids picked one at a time by ``choose`` (given the reply so far), up to and including EOS."""
    eos = tokenizer.eos_token_id  # type: ignore[attr-defined]
    loop = asyncio.get_running_loop()
    awaited = inspect.iscoroutinefunction(choose) or inspect.iscoroutinefunction(type(choose).__call__)
    ids: list[int] = []
    while not ids or ids[-1] != eos:
        ids.append(await choose(ids) if awaited else await loop.run_in_executor(DECODE_THREAD, choose, ids))
        yield ids[-1]


_max_bytes_of: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()


def max_token_bytes(tokenizer: Any) -> int:
    """The most bytes one of ``tokenizer``'s tokens stands for, read once per tokenizer (Tekken has 131,072 tokens,
    and every app made on it, in a test run dozens, would read them all again)."""
    try:
        known = _max_bytes_of.get(tokenizer)
    except TypeError:  # a tokenizer that cannot be a weak key: read it every time
        known = None
    if known is not None:
        return known
    specials = set(tokenizer.all_special_ids)
    most = max(len(tokenizer.decode_single_token_bytes(i)) for i in range(tokenizer.vocab_size) if i not in specials)
    with contextlib.suppress(TypeError):
        _max_bytes_of[tokenizer] = most
    return most
