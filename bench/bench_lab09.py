"""lab-09: what a token mask with a stack costs on Tekken, beside llguidance's, measured in the same run.

For each grammar (an object holding arrays nested 2 and 20 deep around short strings, and
``json_object``) a reply is tokenized with Tekken (131,072 tokens) and walked token by token. At
every step, on the same state:

- lab-09: ``SplitMasker.mask`` over its ``ByteMatcher`` and ``EarleyParser`` (whatever ``LAB_IMPL``
  picks). The first visit of a lexer state computes its split (the lexer's side, once per state:
  "first"); every later mask walks only the undecided tokens ("warm", the per-step cost that counts);
- llguidance: ``LLMatcher.compute_bitmask`` on the same grammar in lark's syntax (forcing off, as in
  the tests), Rust, with its own lexer and Earley parser: its first call at each step (a second call
  at the same state is answered from its cache, so repeats would not time a mask).

The two masks are compared at each step (a wrong mask stops the run). Then the build: lab-09's grammar
(rules, and each lexeme's byte automaton from outlines-core) and its ``SplitMasker`` (a trie of the
vocabulary) against llguidance's compile of the same grammar and its first mask (its tokenizer made
once, beforehand).
Goals (issue #32): the warm per-step cost within 10x llguidance's in pure Python, and flat in depth
(compared on the same tokens: those inside the innermost array, the same strings at both depths).
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable
from typing import Any

from bench.bench_lab08 import best_us
from mini_vllm import load_tokenizer
from mini_vllm.grammars.stack_grammar import (
    JSON_OBJECT,
    _leaf_regex,
    grammar_to_lark,
    lexeme_automaton,
    schema_to_grammar,
)
from mini_vllm.labs import load_lab
from mini_vllm.labtypes.lab08 import token_trie
from mini_vllm.labtypes.lab09 import Grammar
from mini_vllm.testing.stack import GuidanceGrammarOracle
from mini_vllm.testing.structured import _guidance_tokenizer, family_vocabulary
from mini_vllm.tokenizers.base import encode_continuation
from mini_vllm.toy_scripts import TREE_JSON, WEATHER_JSON

FAMILY = "tekken"
GOAL = 10.0  # issue #32: lab-09's warm mask at most this many times llguidance's


def nested(depth: int) -> dict[str, Any]:
    inner: dict[str, Any] = {"type": "string", "maxLength": 12}
    for _ in range(depth):
        inner = {"type": "array", "items": inner}
    return {"type": "object", "properties": {"a": inner}, "required": ["a"], "additionalProperties": False}


INNER = '"cherry", "blossom", "花見 🫨", "Tokyo"'  # the innermost array's items, the same at every depth


def nested_text(depth: int) -> str:
    return '{"a": ' + "[" * depth + INNER + "]" * depth + "}"


GRAMMARS: dict[str, tuple[Any, str]] = {
    "nested, 2 deep": (nested(2), nested_text(2)),
    "nested, 20 deep": (nested(20), nested_text(20)),
    "json_object": (JSON_OBJECT, json.dumps({"weather": WEATHER_JSON, "tree": TREE_JSON}, ensure_ascii=False)),
}


def seconds(make: Callable[[], object]) -> tuple[Any, float]:
    started = time.perf_counter()
    made = make()
    return made, time.perf_counter() - started


def one_grammar(name: str, schema: Any, text: str) -> dict[str, float]:
    lab = load_lab("lab-09")
    vocab = family_vocabulary(FAMILY)
    lexeme_automaton.cache_clear()  # the build is timed from the schema, not from a warm cache
    _leaf_regex.cache_clear()
    grammar, grammar_s = seconds(lambda: schema_to_grammar(schema))
    trie = token_trie(vocab)  # given, once per vocabulary (bench_lab08 times its build): not a grammar's cost
    masker, masker_s = seconds(lambda: lab.SplitMasker(grammar, vocab, trie))
    tokenizer = _guidance_tokenizer(vocab)  # made once: not part of a grammar's compile

    import llguidance

    lark = grammar_to_lark(grammar, llguidance=True)
    # Its compile, and its first mask (it finishes some work lazily); a comment makes the text new to any cache.
    _, compile_s = seconds(lambda: llguidance.LLMatcher(tokenizer, lark + f"// {name}\n", log_level=0)
                            .compute_bitmask())
    guidance = GuidanceGrammarOracle(grammar, vocab)
    matcher = lab.ByteMatcher(grammar, lab.EarleyParser(grammar))
    ids = encode_continuation(load_tokenizer(FAMILY), text)
    inner_start = text.encode().find(INNER.encode())
    inner = range(inner_start, inner_start + len(INNER.encode())) if inner_start >= 0 else range(0)
    first, warm, theirs, inside, at = [], [], [], [], 0
    for token in ids:
        mine, cold = seconds(lambda: masker.mask(matcher))
        first.append(cold * 1e6)
        warm.append(best_us(lambda: masker.mask(matcher), 5))
        if at in inner:
            inside.append(warm[-1])
        _, mask_s = seconds(guidance.matcher.compute_bitmask)  # not compile_s: that one is the build's column
        theirs.append(mask_s * 1e6)
        want = guidance.mask()
        if list(mine) != want:
            raise AssertionError(f"{name}: lab-09's mask differs from llguidance's before token {token}")
        guidance.consume(token)
        at += len(vocab.tokens[token] or b"")
        for byte in vocab.tokens[token] or b"":
            if not matcher.feed(byte):
                raise AssertionError(f"{name}: lab-09's matcher refused a byte of token {token}")
    return {"steps": len(ids), "symbols": _symbols(grammar), "warm": statistics.median(warm),
            "warm max": max(warm), "inside": statistics.median(inside) if inside else 0.0,
            "first total s": sum(first) / 1e6, "guidance": statistics.median(theirs),
            "guidance max": max(theirs), "grammar s": grammar_s, "masker s": masker_s, "guidance s": compile_s}


def _symbols(grammar: Grammar) -> int:
    return len(grammar.rules) + len(grammar.lexemes)


def main() -> list[str]:
    results = {name: one_grammar(name, schema, text) for name, (schema, text) in GRAMMARS.items()}
    print(f"\nlab-09 on {FAMILY} (131,072 tokens): a mask at every step of each reply; µs, median and max")
    print(f"  {'grammar':18} {'steps':>5} {'rules+lexemes':>13} {'lab-09 warm':>12} {'max':>9} "
          f"{'llguidance':>11} {'max':>8} {'ratio':>6} {'first visits':>13}")
    for name, r in results.items():
        print(f"  {name:18} {r['steps']:5.0f} {r['symbols']:13.0f} {r['warm']:12.0f} {r['warm max']:9.0f} "
              f"{r['guidance']:11.0f} {r['guidance max']:8.0f} {r['warm'] / r['guidance']:6.1f} "
              f"{r['first total s']:11.2f} s")
    print("  build: lab-09's grammar (rules and lexeme automata) + its SplitMasker (over the shared trie), seconds, vs "
          "llguidance's compile and first mask")
    for name, r in results.items():
        print(f"  {name:18} {r['grammar s']:8.2f} + {r['masker s']:5.2f}  vs {r['guidance s'] * 1e3:6.1f} ms")
    headlines = []
    for name, r in results.items():
        ratio = r["warm"] / r["guidance"]
        headlines.append(
            f"lab-09 on {FAMILY}, {name}: median µs per mask {r['warm']:.0f} (first visits of lexer states "
            f"{r['first total s']:.2f} s in all) vs llguidance {r['guidance']:.0f}, {ratio:.1f}x (goal <= {GOAL:.0f}x: "
            f"{'met' if ratio <= GOAL else 'missed'}); build {r['grammar s'] + r['masker s']:.2f} s "
            f"(grammar {r['grammar s']:.2f}, masker {r['masker s']:.2f}) vs llguidance's compile and first mask "
            f"{r['guidance s'] * 1e3:.1f} ms")
    deep, shallow = results["nested, 20 deep"]["inside"], results["nested, 2 deep"]["inside"]
    headlines.append(f"lab-09 on {FAMILY}: inside the innermost array (the same tokens), a warm mask 20 deep "
                     f"{deep:.0f} µs, 2 deep {shallow:.0f} µs: {deep / shallow:.2f}x (goal: flat)")
    return headlines


if __name__ == "__main__":
    print("\n".join(main()))
