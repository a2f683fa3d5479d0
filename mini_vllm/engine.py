"""The teaching engine: runs requests concurrently, k tokens per step (default 1), with abort.

It stands where vLLM's ``AsyncLLM`` stands: the server hands it a prompt and sampling
parameters and reads back token ids. It knows nothing about text; turning ids into
text (and noticing stop strings and tool calls) is the output pipeline's job, lab-02.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from mini_vllm.kv_pool import BlockPool
from mini_vllm.sampling import SamplingParams
from mini_vllm.toy_model import ToyModel

MAX_MODEL_LEN = 32768  # the toy model's context window, in tokens (a prompt and its reply together)


class EngineOutput(NamedTuple):
    """One engine step: the token ids it produced (several when a step emits k tokens, as a
    speculative decoder does); ``finish_reason`` is set on the last step ("stop" at EOS,
    "length" at max_tokens). A NamedTuple: one is made per step, and a frozen dataclass costs
    several times more to build."""

    token_ids: tuple[int, ...]
    finish_reason: str | None = None


@dataclass
class EngineStats:
    finished: list[str] = field(default_factory=list)
    aborted: list[str] = field(default_factory=list)


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

    @functools.cached_property
    def max_token_bytes(self) -> int:
        """The most bytes one token stands for: a prompt of B bytes makes at least B / this many tokens."""
        specials = set(self.tokenizer.all_special_ids)
        return max(len(self.tokenizer.decode_single_token_bytes(i))
                   for i in range(self.tokenizer.vocab_size) if i not in specials)

    @property
    def running(self) -> frozenset[str]:
        return frozenset(self._running)

    def admit(self, request_id: str, num_prompt_tokens: int) -> None:
        """Take the blocks for the prompt and the first token, or raise NoFreeBlocks (the server's 503)."""
        self.pool.reserve(request_id, num_prompt_tokens + 1)
        self._running.add(request_id)

    async def generate(self, request_id: str, prompt_ids: Sequence[int], user_message: str,
                       params: SamplingParams) -> AsyncIterator[EngineOutput]:
        """Stream the reply's token ids. Leaving early (break, cancellation) aborts the request.

        Before handing out a token, the engine makes room for the next one; if the pool is
        full, this token is the last, with finish reason "length", as when max_tokens runs out.
        """
        if request_id not in self._running:
            self.admit(request_id, len(prompt_ids))
        reply = self.model.reply_ids(user_message, prompt_ids)
        # Read once: this loop runs for every token of every request, and is the server's hot path.
        eos, delay, per_step, pool = self.tokenizer.eos_token_id, self.token_delay_s, self.tokens_per_step, self.pool
        room = pool.blocks_held(request_id) * pool.block_size  # tokens the held blocks can take
        finished = False
        step_ids: list[int] = []
        try:
            for count, token_id in enumerate(reply, start=1):
                needed = len(prompt_ids) + count + 1  # this token and room for the next
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
        (self.stats.aborted if aborted else self.stats.finished).append(request_id)
