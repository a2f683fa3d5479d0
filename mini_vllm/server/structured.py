"""Constrained decoding in the server: a request's grammar compiled by lab-08's code, and the sampler it drives.

``prepare`` calls :func:`grammar_for`: the schema was already checked against the published
limits (``mini_vllm.schema_regex``); here the regex becomes a character automaton (given),
lab-08's ``lift_to_bytes`` lifts it and its ``TokenIndex`` precomputes every state's mask,
all in a worker process the server can kill (``compile_pool``), under CPU and memory limits.
Compiled grammars are kept per (regex, tokenizer, lab code), in a cache bounded in bytes.
The engine then asks :meth:`Grammar.chooser` for each token: the toy model's scores, and
lab-08's ``StructuredSampler`` picks the best token the mask allows. The engine runs that
choice in its decode thread, never on the event loop (``mini_vllm.engine``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from mini_vllm.constraints import Constraint
from mini_vllm.engine import Engine
from mini_vllm.grammar import vocabulary_of
from mini_vllm.labs import load_lab
from mini_vllm.labtypes.lab08 import TOOL_CALL_START, Vocabulary
from mini_vllm.server.compile_pool import CompilePool

_vocabularies: dict[int, Vocabulary] = {}


@dataclass(frozen=True)
class Grammar:
    lab: ModuleType
    automaton: Any  # a ByteAutomaton (plain data from the worker, built by lab-08's lift_to_bytes)
    vocab: Vocabulary
    index: Any  # the worker's TokenIndex as plain data: ``allowed(state)``
    tool_call: bool  # the grammar is a forced call (its tag may end a thought)

    def chooser(self, engine: Engine, user_message: str, thinking: bool) -> Callable[[Sequence[int]], int]:
        """The next token after the reply's ids so far: the model's scores, masked by lab-08's sampler.

        With thinking on, the thought ends at ``</think>``, or (a forced call) at ``<tool_call>``.
        """
        implicit_end = TOOL_CALL_START if self.tool_call else None
        sampler = self.lab.StructuredSampler(self.automaton, self.vocab, self.index.allowed, thinking=thinking,
                                             implicit_end=implicit_end)
        model = engine.model

        def choose(output_ids: Sequence[int]) -> int:
            return int(sampler.choose(model.scores(user_message, output_ids, opened_thought=thinking)))

        return choose


def vocabulary(engine: Engine) -> Vocabulary:
    """The engine's vocabulary as lab-08's data (every token's bytes: seconds on Tekken, so once)."""
    tokenizer = engine.tokenizer
    found = _vocabularies.get(id(tokenizer))
    if found is None:
        found = _vocabularies[id(tokenizer)] = vocabulary_of(tokenizer)
    return found


async def grammar_for(engine: Engine, constraint: Constraint, pool: CompilePool) -> Grammar:
    """The request's grammar, compiled in ``pool``'s worker (or found in its cache)."""
    lab = load_lab("lab-08")
    tokenizer = engine.tokenizer
    key = (constraint.regex, id(tokenizer), str(lab.__file__))
    vocab = _vocabularies.get(id(tokenizer)) or await asyncio.to_thread(vocabulary, engine)
    compiled = await pool.get(key, constraint.regex, f"{type(tokenizer).__name__}:{id(tokenizer)}",
                              lambda: vocab, str(lab.__file__))
    return Grammar(lab, compiled.automaton, vocab, compiled.index, constraint.source == "tool_call")
