"""The server's mask engine (issue 41) against the oracles: outlines-core and lab-08's reference for a byte
automaton, lab-09's reference for a grammar with a stack; the work it does, counted.

The engine (``mini_vllm/server/mask_engine.py``, ``stack_masks.py``) answers the labs' questions with numpy over
the vocabulary's trie level by level, so the server can meet a new schema on Tekken within seconds. Its masks
must be the labs' masks exactly: every state of three schemas on ``bpe``, the states of a reply on ``tekken``.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest

from mini_vllm import load_tokenizer
from mini_vllm.grammars.constraints import json_object_constraint, schema_constraint
from mini_vllm.grammars.schema_regex import schema_to_regex
from mini_vllm.labs import impl_path, load_lab
from mini_vllm.labtypes.lab08 import token_trie
from mini_vllm.server.compile_worker import CompileJob, _automaton_data, _compile_job
from mini_vllm.server.mask_engine import TableMasks, trie_levels
from mini_vllm.server.stack_decoding import rebuild_grammar
from mini_vllm.server.stack_masks import SplitEngine
from mini_vllm.testing.structured import OutlinesOracle, family_vocabulary, library_grammar, walk

LAB08 = load_lab("lab-08", "solution")
LAB09 = load_lab("lab-09", "solution")
STRINGS = {"type": "object", "properties": {f"s{i}": {"type": "string", "minLength": 3, "maxLength": 12}
                                            for i in range(3)},
           "required": ["s0", "s1", "s2"], "additionalProperties": False}
NESTED = {"type": "object", "properties": {"a": {"type": "array", "maxItems": 2, "items": {
    "type": "array", "maxItems": 2, "items": {"type": "string", "maxLength": 4}}}, "n": {"type": "number"},
    "e": {"enum": ["東京🫨", "x"]}}, "required": ["a", "n", "e"], "additionalProperties": False}
WEATHER = {"type": "object", "properties": {"city": {"type": "string"}, "celsius": {"type": "integer"}},
           "required": ["city", "celsius"], "additionalProperties": False}


def table_masks(regex: str, family: str) -> tuple[Any, TableMasks]:
    """outlines-core's automaton for ``regex`` (as in lab-08's tests) and the engine over it."""
    vocab = family_vocabulary(family)
    automaton = library_grammar(regex).automaton
    _, accepting, rows = _automaton_data(automaton)
    return automaton, TableMasks(rows, accepting, trie_levels(token_trie(vocab), len(vocab)), vocab.eos_token_id)


@pytest.mark.parametrize("schema", [STRINGS, NESTED, WEATHER], ids=["strings", "nested", "weather"])
def test_the_engines_mask_is_lab08s_and_outlines_cores_at_every_state(schema: dict[str, Any]) -> None:
    vocab, regex = family_vocabulary("bpe"), schema_to_regex(schema)
    automaton, engine = table_masks(regex, "bpe")
    masker = LAB08.TokenMasker(automaton, vocab, token_trie(vocab))
    outlines = OutlinesOracle(regex, vocab)
    grammar = library_grammar(regex)
    for state in range(automaton.num_states):
        mine = engine.ids(state)
        assert mine.dtype == np.int64, "the sampler gathers scores at an int64 array of ids"
        want = outlines.mask_at(grammar, state)
        assert mine.tolist() == want, f"state {state}: the engine's mask differs from outlines-core's"
        assert masker.mask(state) == want, f"state {state}: lab-08's reference differs from outlines-core's"
    assert engine.computed == automaton.num_states, "one pass per mask asked"


def test_the_engines_mask_on_tekken_is_outlines_cores_along_a_reply() -> None:
    """The whole 131,072-token vocabulary, at every state of a reply through a string with a CJK and an emoji."""
    vocab, regex = family_vocabulary("tekken"), schema_to_regex(WEATHER)
    automaton, engine = table_masks(regex, "tekken")
    outlines = OutlinesOracle(regex, vocab)
    state = automaton.start
    for token in load_tokenizer("tekken").encode('{"city": "東京🫨 at noon", "celsius": -3}'):
        assert engine.ids(state).tolist() == outlines.mask(), f"tekken, state {state}"
        outlines.consume(token)
        state = walk(automaton, state, vocab.tokens[token] or b"")


def stack_engine(sentence: Any, family: str) -> tuple[Any, Any, SplitEngine]:
    vocab = family_vocabulary(family)
    kind, data = _compile_job(CompileJob("", sentence, str(impl_path("lab-08", "solution")),
                                         str(impl_path("lab-09", "solution"))))
    assert kind == "stack"
    trie = token_trie(vocab)
    return vocab, rebuild_grammar(data), SplitEngine(data[2], vocab, trie, trie_levels(trie, len(vocab)))


SENTENCES = {"json_object": json_object_constraint().sentence,
             "nested": schema_constraint(NESTED, "schema", "test").stack_if_slow}


@pytest.mark.parametrize("family,steps", [("bpe", 60), ("tekken", 12)])
@pytest.mark.parametrize("name", list(SENTENCES))
def test_the_stack_engines_mask_is_lab09s_along_random_walks(name: str, family: str, steps: int) -> None:
    """At every step of random walks (each token drawn from the reference's mask), the engine's mask over lab-09's
    matcher equals lab-09's ``SplitMasker``'s, and the matcher is left where it stood."""
    sentence = SENTENCES[name]
    assert sentence is not None
    vocab, grammar, engine = stack_engine(sentence, family)
    reference = LAB09.SplitMasker(grammar, vocab, token_trie(vocab))
    for seed in range(3):
        rng = random.Random(seed)
        matcher = LAB09.ByteMatcher(grammar, LAB09.EarleyParser(grammar))
        output = b""
        for _ in range(steps):
            before = matcher.checkpoint()
            mine = engine.mask(matcher)
            assert matcher.checkpoint() == before, "the engine leaves the matcher where it stood"
            want = reference.mask(matcher)
            assert mine.tolist() == want, (
                f"{family}, {name}, after {output!r}: the engine's mask differs from lab-09's "
                f"(only in yours: {sorted(set(mine.tolist()) - set(want))[:8]}, "
                f"only in lab-09's: {sorted(set(want) - set(mine.tolist()))[:8]})")
            ordinary = [t for t in want if t != vocab.eos_token_id]
            if not ordinary:
                break
            token = rng.choice(ordinary)
            data = vocab.tokens[token] or b""
            assert all(matcher.feed(b) for b in data)
            output += data


def test_a_split_is_computed_once_per_lexer_state_and_node() -> None:
    """Inside a string the lexer state repeats: asking again at the same state computes no split."""
    sentence = SENTENCES["json_object"]
    assert sentence is not None
    _, grammar, engine = stack_engine(sentence, "bpe")
    matcher = LAB09.ByteMatcher(grammar, LAB09.EarleyParser(grammar))
    for byte in b'{"k": "abc':
        assert matcher.feed(byte)
    first = engine.mask(matcher)
    computed = engine.computed
    assert matcher.feed(ord("d"))
    assert engine.mask(matcher).tolist() == first.tolist(), "one more letter inside the string: the same mask"
    assert engine.computed == computed, "the same lexer state and parser: every split is a lookup"


def test_the_release_leaves_the_engine_out_and_its_server_serves_with_the_labs_masks(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Pasted into lab-08's starter, the engine earned task 2 and most of task 4 (38.5 of 100 points): the student's
    release leaves it out, and there the decode process asks the student's own TokenMasker and SplitMasker."""
    import pickle

    from instructor.release import ships
    from mini_vllm.server import lazy_masks
    from mini_vllm.server.decode_sessions import Process

    assert not ships("mini_vllm/server/mask_engine.py") and not ships("mini_vllm/server/stack_masks.py")
    vocab = family_vocabulary("bpe")
    paths = (str(impl_path("lab-08", "solution")), str(impl_path("lab-09", "solution")))
    constraints = {"regex": schema_constraint(STRINGS, "schema", "test"), "stack": json_object_constraint()}
    for present in (True, False):
        monkeypatch.setattr(lazy_masks, "engine_present", lambda present=present: present)
        monkeypatch.setattr("mini_vllm.server.decode_sessions.engine_present", lambda present=present: present)
        here = Process()
        here.add_vocabulary("v", vocab, [t or b"" for t in vocab.tokens], [], 0)
        for kind, constraint in constraints.items():
            job = CompileJob(constraint.regex if kind == "regex" else "", constraint.sentence if kind == "stack"
                             else None, *paths)
            here.grammars[kind] = pickle.dumps(_compile_job(job))
            sampler, key = here.open(kind, "v", paths, False, False)
            masker = here.maskers[key][1]
            uses_engine = type(getattr(masker, "engine", masker)).__module__.startswith("mini_vllm.server")
            assert uses_engine == present, f"{kind}: the engine where present, the labs' own masks where not"
            scores = np.zeros(len(vocab))
            chosen = [int(sampler.choose(scores)) for _ in range(3)]
            assert all(0 <= t < len(vocab) for t in chosen)
