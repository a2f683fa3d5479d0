"""lab-08: what a token mask costs, computed five ways on the same states of the same reply.

For each vocabulary (the shipped bpe, Mistral 7B's 32,000 pieces, Tekken's 131,072 tokens) the
toy model's weather object is tokenized and walked through the weather schema's byte automaton.
At sampled steps of that walk (the same steps for every method) the mask is computed by:

- scan: lab-08's ``TokenMasker.scan`` (every token walked from the state);
- trie walk: ``TokenMasker.mask`` (a byte trie, pruned at dead prefixes);
- index: ``TokenIndex.allowed`` (a lookup into masks computed before decoding);
- llguidance: ``LLMatcher.compute_bitmask`` (its plain mask: forcing off, as in the tests);
- outlines-core: ``Index.get_allowed_tokens``.

Then a constrained token as the server takes it (issue #31's goal: at most 1 ms median on Tekken):
lab-08's ``StructuredSampler.choose`` over the index (the mask lookup and the masked choice) against
llguidance's ``compute_bitmask`` plus the same choice (the bitmask applied to the scores, then
argmax), on the toy model's scores for the weather reply; the toy model's scoring is timed apart.

Then the cost of precomputing: lab-08's ``TokenIndex`` against outlines-core's ``Index`` (goal: at most
2x its time) and llguidance's matcher, in seconds and in resident memory added. Python against Rust:
the ratios, not the absolutes, are the lesson (and the index makes a step a lookup either way).
"""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Callable

import numpy as np

from mini_vllm import load_tokenizer
from mini_vllm.grammars.grammar import schema_to_chars, schema_to_regex
from mini_vllm.labs import load_lab
from mini_vllm.labtypes.lab08 import TokenTrie, Vocabulary, build_token_trie
from mini_vllm.testing.structured import GuidanceOracle, OutlinesOracle, family_vocabulary, walk
from mini_vllm.tokenizers.base import encode_continuation
from mini_vllm.toy_model import ToyModel
from mini_vllm.toy_scripts import WEATHER_JSON_TEXT

FAMILIES = ("bpe", "mistral", "tekken")
SAMPLED_STEPS = 10  # states timed per vocabulary (the plain scan of Tekken takes about a second each)
SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string", "maxLength": 8}, "temperature": {"type": "integer"},
                   "unit": {"enum": ["celsius", "fahrenheit"]}, "note": {"type": "string"}},
    "required": ["city", "temperature", "unit", "note"], "additionalProperties": False,
}
METHODS = ("scan", "trie walk", "index", "llguidance", "outlines-core")
MESSAGE = "the weather in Tokyo as json, please"  # the toy model's chatty weather reply, masked to SCHEMA
TOKEN_GOAL_MS = 1.0  # issue #31: a constrained token on Tekken, median
BUILD_GOAL = 2.0  # issue #31: lab-08's index build at most this many times outlines-core's


def built_once(make: Callable[[], TokenTrie]) -> tuple[TokenTrie, float]:
    started = time.perf_counter()
    made = make()
    return made, time.perf_counter() - started


def resident_bytes() -> int:
    with open("/proc/self/statm", encoding="ascii") as statm:
        return int(statm.read().split()[1]) * 4096


def built(make: Callable[[], object]) -> tuple[object, float, int]:
    """(the object, seconds to build it, resident memory it added)."""
    gc.collect()
    before = resident_bytes()
    started = time.perf_counter()
    made = make()
    seconds = time.perf_counter() - started
    gc.collect()
    return made, seconds, resident_bytes() - before


def best_us(call: Callable[[], object], repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        call()
        best = min(best, time.perf_counter() - started)
    return best * 1e6


def one_family(family: str) -> dict[str, float]:
    lab = load_lab("lab-08")
    vocab: Vocabulary = family_vocabulary(family)
    regex = schema_to_regex(SCHEMA)
    automaton = lab.lift_to_bytes(schema_to_chars(SCHEMA))  # as the server builds it
    ids = encode_continuation(load_tokenizer(family), WEATHER_JSON_TEXT)
    every = max(1, len(ids) // SAMPLED_STEPS)
    timed_steps = set(range(0, len(ids), every))

    # The trie is given and built once per vocabulary (shared by every grammar): timed from scratch here.
    trie, trie_seconds = built_once(lambda: build_token_trie(vocab.tokens))
    masker = lab.TokenMasker(automaton, vocab, trie)
    index, index_seconds, index_memory = built(lambda: lab.TokenIndex(automaton, vocab, trie))
    outlines, outlines_seconds, outlines_memory = built(lambda: OutlinesOracle(regex, vocab))
    guidance, guidance_seconds, _ = built(lambda: GuidanceOracle(regex, vocab))

    per_step: dict[str, list[float]] = {m: [] for m in METHODS}
    state = automaton.start
    for step, token in enumerate(ids):
        if step in timed_steps:
            heavy = 1 if family != "bpe" else 3
            per_step["scan"].append(best_us(lambda s=state: masker.scan(s), heavy))
            per_step["trie walk"].append(best_us(lambda s=state: masker.mask(s), heavy))
            per_step["index"].append(best_us(lambda s=state: index.allowed(s), 50))  # type: ignore[attr-defined]
            per_step["llguidance"].append(best_us(guidance.matcher.compute_bitmask, 20))
            oc_state = outlines.state  # type: ignore[attr-defined]
            per_step["outlines-core"].append(
                best_us(lambda s=oc_state: outlines.index.get_allowed_tokens(s), 5))  # type: ignore[attr-defined]
        guidance.consume(token)
        outlines.consume(token)  # type: ignore[attr-defined]
        state = walk(automaton, state, vocab.tokens[token] or b"")

    token = constrained_tokens(lab, automaton, vocab, index, regex, family)
    stats = index.stats  # type: ignore[attr-defined]
    print(f"\nlab-08 on {family} ({len(vocab):,} tokens), the weather schema, {len(timed_steps)} of the reply's "
          f"{len(ids)} steps; µs per mask, median and max")
    for method in METHODS:
        times = per_step[method]
        print(f"  {method:14} {statistics.median(times):12.1f} {max(times):12.1f}")
    print(f"  a constrained token, {token['steps']} steps of the masked reply; ms, median and max:")
    for name in ("lab-08", "llguidance", "scores"):
        label = {"lab-08": "lab-08 choose (index lookup + masked argmax)",
                 "llguidance": "llguidance bitmask + the same argmax",
                 "scores": "the toy model's scores (not part of either)"}[name]
        print(f"    {label:46} {token[name + ' median']:8.3f} {token[name + ' max']:8.3f}")
    print(f"  trie build (once): {trie_seconds:.2f} s")
    print(f"  index build: lab-08 {index_seconds:.2f} s, +{index_memory / 2**20:.1f} MiB resident "
          f"({stats.states} states, {stats.entries:,} ids stored, {stats.steps:,} automaton steps); "
          f"outlines-core {outlines_seconds:.2f} s, +{outlines_memory / 2**20:.1f} MiB; "
          f"llguidance's matcher {guidance_seconds:.2f} s")
    result = {m: statistics.median(per_step[m]) for m in METHODS}
    result.update(index_seconds=index_seconds, outlines_seconds=outlines_seconds, guidance_seconds=guidance_seconds,
                  token_ms=token["lab-08 median"], guidance_token_ms=token["llguidance median"],
                  scores_ms=token["scores median"])
    return result


def constrained_tokens(lab: object, automaton: object, vocab: Vocabulary, index: object, regex: str,
                       family: str) -> dict[str, float]:
    """The masked weather reply, token by token: lab-08's choice and llguidance's mask + argmax on the same scores."""
    model = ToyModel(load_tokenizer(family))
    sampler = lab.StructuredSampler(automaton, vocab, index.allowed)  # type: ignore[attr-defined]
    guidance = GuidanceOracle(regex, vocab)
    times: dict[str, list[float]] = {"lab-08": [], "llguidance": [], "scores": []}
    ids: list[int] = []
    while sampler.phase != "done" and len(ids) < 200:
        started = time.perf_counter()
        scores = np.asarray(model.scores(MESSAGE, ids), dtype=np.float64)
        times["scores"].append(time.perf_counter() - started)
        started = time.perf_counter()
        bits = guidance.matcher.compute_bitmask()
        allowed = np.unpackbits(np.frombuffer(bits, dtype=np.uint8), bitorder="little")[:len(vocab)].view(bool)
        theirs = int(np.argmax(np.where(allowed, scores, -np.inf)))
        times["llguidance"].append(time.perf_counter() - started)
        started = time.perf_counter()
        mine = sampler.choose(scores)
        times["lab-08"].append(time.perf_counter() - started)
        if mine != theirs:
            raise AssertionError(f"{family}: lab-08 chose {mine}, llguidance's mask + argmax {theirs}")
        ids.append(mine)
        if sampler.phase != "done":
            guidance.consume(mine)
    summary: dict[str, float] = {"steps": len(ids)}
    for name, values in times.items():
        summary[name + " median"] = statistics.median(values) * 1e3
        summary[name + " max"] = max(values) * 1e3
    return summary


def main() -> list[str]:
    headlines = []
    for family in FAMILIES:
        r = one_family(family)
        gc.collect()
        headlines.append(
            f"lab-08 on {family}: median µs per mask: scan {r['scan']:.0f}, trie {r['trie walk']:.0f}, "
            f"index {r['index']:.2f}, llguidance {r['llguidance']:.1f}, outlines-core {r['outlines-core']:.0f}; "
            f"a constrained token {r['token_ms']:.3f} ms vs llguidance's mask + argmax {r['guidance_token_ms']:.3f} ms"
            f" (scores {r['scores_ms']:.3f} ms)" + (f" (goal <= {TOKEN_GOAL_MS} ms: "
            f"{'met' if r['token_ms'] <= TOKEN_GOAL_MS else 'missed'})" if family == "tekken" else "") +
            f"; index build {r['index_seconds']:.2f} s vs outlines-core {r['outlines_seconds']:.2f} s, "
            f"{r['index_seconds'] / r['outlines_seconds']:.1f}x (goal <= {BUILD_GOAL:.0f}x: "
            f"{'met' if r['index_seconds'] <= BUILD_GOAL * r['outlines_seconds'] else 'missed'})")
    return headlines


if __name__ == "__main__":
    print("\n".join(main()))
