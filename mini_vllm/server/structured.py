"""Constrained decoding in the server: a request's grammar compiled by lab-08's code, and the sampler it drives.

``prepare`` (in a worker thread) calls :func:`compile_constraint`: the regex becomes a character
automaton (given), lab-08's ``lift_to_bytes`` lifts it, its ``TokenIndex`` precomputes every
state's mask. Compiled grammars are kept per (regex, tokenizer), so a schema a client sends
again costs nothing. The engine then asks :meth:`Grammar.chooser` for each token: the toy
model's scores, and lab-08's ``StructuredSampler`` picks the best token the mask allows.

That choice runs on the event loop, between the engine's steps (each step yields to the loop):
with the reference, the toy model's scores (one numpy draw) and the masked argmax take about a
millisecond a token on Tekken's 131,072 tokens (`make bench`); a student's plain loop over the
mask takes tens. A real server computes logits and masks on the GPU worker instead.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from mini_vllm.constraints import Constraint
from mini_vllm.engine import Engine
from mini_vllm.grammar import regex_to_chars, vocabulary_of
from mini_vllm.labs import load_lab
from mini_vllm.labtypes.lab08 import TOOL_CALL_START, Vocabulary

CACHED_GRAMMARS = 32
_grammars: OrderedDict[tuple[str, int, str], Grammar] = OrderedDict()
_vocabularies: dict[int, Vocabulary] = {}
_lock = threading.Lock()


@dataclass(frozen=True)
class Grammar:
    lab: ModuleType
    automaton: Any  # lab-08's ByteAutomaton
    vocab: Vocabulary
    index: Any  # lab-08's TokenIndex
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
            return int(sampler.choose(model.score_array(user_message, output_ids, opened_thought=thinking)))

        return choose


def compile_constraint(engine: Engine, constraint: Constraint) -> Grammar:
    lab = load_lab("lab-08")
    tokenizer = engine.tokenizer
    key = (constraint.regex, id(tokenizer), str(lab.__file__))
    with _lock:
        if key in _grammars:
            _grammars.move_to_end(key)
            return _grammars[key]
        vocab = _vocabularies.get(id(tokenizer))
        if vocab is None:
            vocab = _vocabularies[id(tokenizer)] = vocabulary_of(tokenizer)
    automaton = lab.lift_to_bytes(regex_to_chars(constraint.regex))
    grammar = Grammar(lab, automaton, vocab, lab.TokenIndex(automaton, vocab), constraint.source == "tool_call")
    with _lock:
        _grammars[key] = grammar
        while len(_grammars) > CACHED_GRAMMARS:
            _grammars.popitem(last=False)
    return grammar
