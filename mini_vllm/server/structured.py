"""Constrained decoding in the server: a request's grammar compiled by lab-08's code (and lab-09's, for a
stack), and the sampler it drives.

``prepare`` calls :func:`grammar_for`: the schema was already checked against the published
limits (``mini_vllm.grammars.schema_regex``); here the regex becomes a character automaton (given)
and lab-08's ``lift_to_bytes`` lifts it, in a worker process the server can kill (``compile_pool``),
under CPU and memory limits. A grammar with a stack (a recursive schema, ``json_object``: the
constraint's ``sentence``) is lab-09's grammar instead, each lexeme lifted by lab-08's ``lift_to_bytes``
in the same worker. No compile walks the vocabulary: the masks are computed as the reply goes, in
the decode process, by the server's mask engine at each state's first visit (``lazy_masks``,
``stack_masks``; in the student's release, lab-08's ``TokenMasker`` and lab-09's ``SplitMasker``), over
the vocabulary's one trie. While lab-09 is still the
starter's stub, ``json_object`` falls back to lab-08's flat object, and a recursive schema is the
501 that names lab-09's task.
Compiled grammars are kept per (grammar, lab code), in a cache bounded in bytes.
The engine then asks :meth:`Grammar.chooser` for each token: the toy model's scores, and
lab-08's ``StructuredSampler`` picks the best token the mask allows, in the decode process
(``decode_worker``): never on the event loop, nor in a thread that shares its GIL.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass

from mini_vllm.engine import Engine
from mini_vllm.grammars.constraints import Constraint
from mini_vllm.grammars.grammar import vocabulary_of
from mini_vllm.labs import impl_path
from mini_vllm.labtypes.lab08 import Vocabulary
from mini_vllm.server.compile_pool import Compiled, CompilePool
from mini_vllm.server.compile_worker import CompileJob
from mini_vllm.server.decode_worker import Channel, DecodeWorker

_vocabularies: dict[int, tuple[Vocabulary, tuple[list[bytes], list[int], int]]] = {}


@dataclass(frozen=True)
class Grammar:
    compiled: Compiled  # the worker's plain data, pickled
    vocab_key: str
    vocab: Vocabulary
    raw: tuple[list[bytes], list[int], int]  # every token's bytes, the special ids, the seed: the toy model's view
    lab_paths: tuple[str, str]  # lab-08's and lab-09's files, as load_lab chose them
    pool: CompilePool
    tool_call: bool  # the grammar is a forced call (its tag may end a thought)

    def chooser(self, engine: Engine, user_message: str, thinking: bool) -> Chooser:
        """The next token after the reply's ids so far: the model's scores, masked by lab-08's sampler, chosen
        in the decode process. With thinking on, the thought ends at ``</think>``, or (a forced call) at
        ``<tool_call>``."""
        decoder = self.pool.decoder
        sid, channel = decoder.open(self.vocab_key, self.vocab, self.raw, self.compiled.blob, self.compiled.key,
                                    self.lab_paths, user_message, thinking, self.tool_call)
        return Chooser(decoder, sid, channel)


@dataclass
class Chooser:
    """One reply's session in the decode process: awaited once per token, closed when the reply ends."""

    decoder: DecodeWorker
    sid: int
    channel: Channel  # the session's own socket: a token's request and answer cross there
    known: int = 0  # the reply's ids the session holds already: each token sends only the new ones

    async def __call__(self, output_ids: Sequence[int]) -> int:
        token = await self.channel.next(output_ids, min(self.known, len(output_ids)))
        self.known = len(output_ids)
        return token

    def close(self) -> None:
        self.decoder.close_session(self.sid, self.channel)


def vocabulary(engine: Engine) -> tuple[Vocabulary, tuple[list[bytes], list[int], int]]:
    """The engine's vocabulary as lab-08's data, and as the toy model reads it (seconds on Tekken, so once)."""
    tokenizer = engine.tokenizer
    found = _vocabularies.get(id(tokenizer))
    if found is None:
        raw = [tokenizer.decode_single_token_bytes(i) for i in range(tokenizer.vocab_size)]
        found = _vocabularies[id(tokenizer)] = (vocabulary_of(tokenizer),
                                                (raw, list(tokenizer.all_special_ids), engine.model.seed))
    return found


async def grammar_for(engine: Engine, constraint: Constraint, pool: CompilePool) -> Grammar:
    """The request's grammar, compiled in ``pool``'s worker (or found in its cache)."""
    stack = constraint.sentence or constraint.stack_if_slow
    lab_paths = (str(impl_path("lab-08")), str(impl_path("lab-09")) if stack else "")  # loaded by the workers
    job = CompileJob(constraint.regex, constraint.sentence, *lab_paths, fallback=constraint.stack_if_slow)
    tokenizer = engine.tokenizer
    found = _vocabularies.get(id(tokenizer))
    vocab, raw = found if found is not None else await asyncio.to_thread(vocabulary, engine)
    vocab_key = f"{type(tokenizer).__name__}:{id(tokenizer)}:{engine.model.seed}"
    compiled = await pool.get(job, job)  # a compile never reads the vocabulary: one per grammar, any tokenizer
    return Grammar(compiled, vocab_key, vocab, raw, lab_paths, pool, constraint.source == "tool_call")
