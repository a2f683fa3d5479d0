"""lab-08: what a token mask costs, computed five ways on the same states of the same reply.

For each vocabulary (the shipped bpe, Mistral 7B's 32,000 pieces, Tekken's 131,072 tokens) the
toy model's weather object is tokenized and walked through the weather schema's byte automaton.
At sampled steps of that walk (the same steps for every method) the mask is computed by:

- scan: lab-08's ``TokenMasker.scan`` (every token walked from the state);
- trie walk: ``TokenMasker.mask`` (a byte trie, pruned at dead prefixes);
- index: ``TokenIndex.allowed`` (a lookup into masks computed before decoding);
- llguidance: ``LLMatcher.compute_bitmask`` (its plain mask: forcing off, as in the tests);
- outlines-core: ``Index.get_allowed_tokens``.

Then the cost of precomputing: lab-08's ``TokenIndex`` against outlines-core's ``Index``, in
seconds and in resident memory added. Python against Rust: the ratios, not the absolutes, are
the lesson (and the index makes a step a lookup either way).
"""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Callable

from mini_vllm import load_tokenizer
from mini_vllm.grammar import schema_to_chars, schema_to_regex
from mini_vllm.labs import load_lab
from mini_vllm.labtypes.lab08 import Vocabulary
from mini_vllm.testing.structured import GuidanceOracle, OutlinesOracle, family_vocabulary, oracle_bytes, walk
from mini_vllm.tokenizer_base import encode_continuation
from mini_vllm.toy_model import WEATHER_JSON_TEXT

FAMILIES = ("bpe", "mistral", "tekken")
SAMPLED_STEPS = 10  # states timed per vocabulary (the plain scan of Tekken takes about a second each)
SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string", "maxLength": 8}, "temperature": {"type": "integer"},
                   "unit": {"enum": ["celsius", "fahrenheit"]}, "note": {"type": "string"}},
    "required": ["city", "temperature", "unit", "note"], "additionalProperties": False,
}
METHODS = ("scan", "trie walk", "index", "llguidance", "outlines-core")


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
    automaton = oracle_bytes(schema_to_chars(SCHEMA))
    ids = encode_continuation(load_tokenizer(family), WEATHER_JSON_TEXT)
    every = max(1, len(ids) // SAMPLED_STEPS)
    timed_steps = set(range(0, len(ids), every))

    masker = lab.TokenMasker(automaton, vocab)
    masker.mask(automaton.start)  # builds the trie: a one-off, reported below, not per step
    trie_seconds = best_us(lambda: lab.TokenMasker(automaton, vocab).mask(automaton.start), 1) / 1e6
    index, index_seconds, index_memory = built(lambda: lab.TokenIndex(automaton, vocab))
    outlines, outlines_seconds, outlines_memory = built(lambda: OutlinesOracle(regex, vocab))
    guidance = GuidanceOracle(regex, vocab)

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

    stats = index.stats  # type: ignore[attr-defined]
    print(f"\nlab-08 on {family} ({len(vocab):,} tokens), the weather schema, {len(timed_steps)} of the reply's "
          f"{len(ids)} steps; µs per mask, median and max")
    for method in METHODS:
        times = per_step[method]
        print(f"  {method:14} {statistics.median(times):12.1f} {max(times):12.1f}")
    print(f"  trie build (once): {trie_seconds:.2f} s")
    print(f"  index build: lab-08 {index_seconds:.2f} s, +{index_memory / 2**20:.1f} MiB resident "
          f"({stats.states} states, {stats.entries:,} ids stored, {stats.steps:,} automaton steps); "
          f"outlines-core {outlines_seconds:.2f} s, +{outlines_memory / 2**20:.1f} MiB")
    result = {m: statistics.median(per_step[m]) for m in METHODS}
    result.update(index_seconds=index_seconds, outlines_seconds=outlines_seconds)
    return result


def main() -> list[str]:
    headlines = []
    for family in FAMILIES:
        r = one_family(family)
        headlines.append(
            f"lab-08 on {family}: median µs per mask: scan {r['scan']:.0f}, trie {r['trie walk']:.0f}, "
            f"index {r['index']:.2f}, llguidance {r['llguidance']:.1f}, outlines-core {r['outlines-core']:.0f}; "
            f"index build {r['index_seconds']:.2f} s vs outlines-core {r['outlines_seconds']:.2f} s "
            f"(goal: index step <= llguidance's mask: {'met' if r['index'] <= r['llguidance'] else 'missed'})")
    return headlines


if __name__ == "__main__":
    print("\n".join(main()))
