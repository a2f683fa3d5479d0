"""lab-04: per-token cost of the incremental detokenizer, against DecodeStream and the textbook fix.

Two measurements, each side by side in one run:

1. **Growth** (the shipped BPE): the solution, the original window-diff (the textbook fix: a
   full-history decode on every split character) and Hugging Face's ``DecodeStream``, at
   256, 4k and 64k tokens, on ASCII, CJK, emoji and real U+FFFD streams. Per-token cost at
   length N is timed on the last 128 tokens of an N-token stream: the tokens before them are
   the prompt and the first 16 are pushed untimed (so a one-time cost, like DecodeStream
   decoding its whole prompt at the first step, is not counted). That keeps the quadratic
   baselines measurable at 64k tokens.
2. **Versus DecodeStream, on every family** (byte, bpe, spm, mistral, tekken): ASCII, CJK and
   emoji streams of 4,096 tokens, timed whole, the two methods taking turns, best of several
   rounds. Both run on the same Rust ``decode`` (a ``tokenizers.Tokenizer`` for each family,
   :mod:`mini_vllm.tokenizers.hf`), so the ratio is the algorithm's cost, not the backend's. Issue 43's
   target is at most 2.5x (the course's was 3x).
3. **On the course's tokenizer protocol** (the shipped BPE): the solution over ``HFTokenizer``, which checks
   every id of every window as the tests and the grading sandbox's copy do, over the raw ``tokenizers.Tokenizer``
   (no check), a model of vLLM's ``FastIncrementalDetokenizer`` (:class:`VllmFastShaped`: ``DecodeStream`` plus
   the Python vLLM runs around it per token) and ``DecodeStream``, all taking turns. Issue 43's target is
   at most 2.5x DecodeStream, which it equates with at most 1x vLLM's Fast detokenizer: both ratios are
   printed, with the machine's load (wall time on a loaded machine favours the Rust side). Two floors, with no
   bookkeeping: ``HFTokenizer.decode`` of the last ``window`` = 4 ids alone (the smallest window a push of the
   lab's design decodes: three tokens of context and the new one), and the very ``decode`` calls the solution
   makes on that stream, recorded once and replayed (the floor under its bookkeeping), through ``HFTokenizer``
   and on the raw ``Tokenizer``.

The solution is whatever ``LAB_IMPL`` selects; it is handed the ``tokenizers.Tokenizer`` itself
(its ``decode(ids, skip_special_tokens=...)`` is the one method the lab uses).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence

from tokenizers import Tokenizer as HFRawTokenizer
from tokenizers.decoders import DecodeStream

from bench.common import Row, cost, print_table, save_plot
from mini_vllm import load_tokenizer
from mini_vllm.labs import load_lab
from mini_vllm.tokenizers.hf import (
    HFTokenizer,
    hf_bpe_tokenizer,
    hf_byte_tokenizer,
    hf_mistral_tokenizer,
    hf_spm_tokenizer,
    hf_tekken_tokenizer,
)

try:  # the textbook fallback is a correct (slow) lab-04: the student's copy of the course leaves it out
    from instructor.baselines import OriginalWindowDiff
except ImportError:
    OriginalWindowDiff = None

SIZES = (256, 4096, 65536)
WARM_UP = 16
TIMED = 128
STREAMS = {
    "ascii": "The quick brown fox jumps over the lazy dog. ",
    "cjk": "服务器乱码字节",  # characters the shipped BPE cuts into several tokens
    "emoji": "🫨🚀😊🍜",
    "fffd": "\ufffd",
}
# Each family's vocabulary as a real tokenizers.Tokenizer, so DecodeStream can run on it.
HF_FAMILIES: dict[str, Callable[[], HFRawTokenizer]] = {
    "byte": hf_byte_tokenizer, "bpe": hf_bpe_tokenizer, "spm": hf_spm_tokenizer,
    "mistral": hf_mistral_tokenizer, "tekken": hf_tekken_tokenizer,
}
SIDE_BY_SIDE_TOKENS, SIDE_BY_SIDE_PROMPT, ROUNDS = 4096, 256, 7
TARGET = 2.5  # issue 43: on the same Rust decode (the course target was 3x)
PROTOCOL_TARGET = 2.5  # over HFTokenizer on the shipped BPE (issue 43 equates it with 1x vLLM's Fast detokenizer)

# A method takes the prompt and returns a step function to call once per output token.
Starter = Callable[[Sequence[int]], Callable[[int], object]]


def solution_on(raw: HFRawTokenizer) -> Starter:
    lab = load_lab("lab-04")
    return lambda prompt: lab.IncrementalDetokenizer(raw, prompt).push


def decode_stream_on(raw: HFRawTokenizer) -> Starter:
    def start(prompt: Sequence[int]) -> Callable[[int], object]:
        stream = DecodeStream(ids=list(prompt), skip_special_tokens=False)
        return lambda token_id: stream.step(raw, token_id)

    return start


def decode_alone_on(tokenizer: HFTokenizer, window: int = 4) -> Starter:
    """One ``decode`` of the last ``window`` ids per token and nothing else: what any push of the lab's design
    pays at least (it decodes its context with the new token), bookkeeping left out."""
    def start(prompt: Sequence[int]) -> Callable[[int], object]:
        ids = list(prompt)

        def step(token_id: int) -> object:
            ids.append(token_id)
            return tokenizer.decode(ids[-window:], False)

        return step

    return start


class _Recorder:
    """A tokenizer that passes ``decode`` on and notes each window it was handed, per pushed token."""

    def __init__(self, tokenizer: HFTokenizer | HFRawTokenizer) -> None:
        self.tokenizer = tokenizer
        self.calls: list[list[list[int]]] = [[]]

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = False) -> str:
        self.calls[-1].append(list(ids))
        return self.tokenizer.decode(ids, skip_special_tokens)


def its_decodes_alone_on(tokenizer: HFTokenizer | HFRawTokenizer, output: Sequence[int]) -> Starter:
    """The ``decode`` calls the solution makes for each token of ``output``, replayed with nothing else: the floor
    under that solution's bookkeeping (recorded once per prompt, untimed)."""
    lab = load_lab("lab-04")

    def start(prompt: Sequence[int]) -> Callable[[int], object]:
        recorder = _Recorder(tokenizer)
        detok = lab.IncrementalDetokenizer(recorder, prompt)
        recorder.calls = []
        for token_id in output:
            recorder.calls.append([])
            detok.push(token_id)
        windows, decode = iter(recorder.calls), tokenizer.decode

        def step(token_id: int) -> object:
            for ids in next(windows):
                decode(ids, False)
            return None

        return step

    return start


class VllmFastShaped:
    """The work vLLM's ``FastIncrementalDetokenizer`` does per token around ``DecodeStream.step``, as a model.

    Read off ``vllm/v1/engine/detokenizer.py`` (v0.9): ``update`` takes the step's new ids, guards against none
    and against a stop token, appends each id and adds ``decode_next``'s text to ``output_text`` (a ``+=`` on an
    attribute: a copy of the text so far), then skips the stop strings there are none of; ``decode_next`` is the
    ``step`` and an ``or ""``; the output processor then asks ``get_next_output_text`` for the delta. One token per
    step, no stop strings, special tokens spaced (vLLM's defaults). Not vLLM's code: the same work, written here.
    """

    def __init__(self, raw: HFRawTokenizer, prompt: Sequence[int]) -> None:
        self.tokenizer, self.token_ids = raw, list(prompt)
        self.stream = DecodeStream(ids=list(prompt), skip_special_tokens=False)  # (vLLM primes it with steps)
        self.output_text, self.sent = "", 0
        self.stop: list[str] = []
        self.stop_buffer_length = 0

    def decode_next(self, token_id: int) -> str:
        return self.stream.step(self.tokenizer, token_id) or ""

    def update(self, new_token_ids: list[int], stop_terminated: bool) -> None:
        if not new_token_ids or stop_terminated:
            return
        for token_id in new_token_ids:
            self.token_ids.append(token_id)
            self.output_text += self.decode_next(token_id)
        if self.stop:
            raise NotImplementedError("stop strings are not modelled")

    def next_output_text(self) -> str:
        end = len(self.output_text) - self.stop_buffer_length
        if self.sent >= end:
            return ""
        start, self.sent = self.sent, end
        return self.output_text[start:end]

    def push(self, token_id: int) -> str:
        self.update([token_id], stop_terminated=False)
        return self.next_output_text()


def methods() -> dict[str, Starter]:
    raw = hf_bpe_tokenizer()

    def original(prompt: Sequence[int]) -> Callable[[int], object]:
        return OriginalWindowDiff(HFTokenizer(raw), prompt).push

    found = {"solution": solution_on(raw), "original window-diff": original, "DecodeStream": decode_stream_on(raw)}
    return {name: start for name, start in found.items() if name != "original window-diff" or OriginalWindowDiff}


def per_token_us(start: Starter, ids: Sequence[int], repeats: int = 5) -> float:
    """µs per token over the last TIMED tokens of ``ids``, the rest before them given as the prompt."""
    prompt = ids[: len(ids) - TIMED - WARM_UP]
    warm_up, output = ids[len(prompt) : len(ids) - TIMED], ids[len(ids) - TIMED :]
    best = float("inf")
    for _ in range(repeats):
        step = start(prompt)
        for token_id in warm_up:
            step(token_id)
        began = time.perf_counter()
        for token_id in output:
            step(token_id)
        best = min(best, time.perf_counter() - began)
    return best / TIMED * 1e6


def growth() -> list[str]:
    """Part 1: cost per token as the stream grows, on the shipped BPE."""
    raw, headlines = hf_bpe_tokenizer(), []
    for kind, text in STREAMS.items():
        ids = raw.encode(text * (max(SIZES) // 2), add_special_tokens=False).ids[: max(SIZES)]
        rows = [Row(name, n, per_token_us(start, ids[:n])) for n in SIZES for name, start in methods().items()]
        print_table(f"lab-04 incremental detokenizer, {kind} stream (shipped BPE, the same Rust decode)", rows,
                    "solution")
        save_plot(f"lab04-{kind}", f"lab-04: per-token cost, {kind} stream", rows)
        if kind in ("cjk", "fffd"):
            for method in methods():
                grew = cost(rows, method, SIZES[-1]) / cost(rows, method, SIZES[0])
                headlines.append(f"lab-04 {method} on {kind}, per-token cost {SIZES[-1]} vs {SIZES[0]} tokens: "
                                 f"{grew:.2f}x" + (" (target <= 1.5x)" if method == "solution" else ""))
    return headlines


def chunk_seconds(start: Starter, prompt: Sequence[int], output: Sequence[int], chunk: int = 256) -> list[float]:
    """Seconds spent on each ``chunk`` tokens of ``output`` (a round on a shared machine can be preempted)."""
    step, spent = start(prompt), []
    for first in range(0, len(output), chunk):
        began = time.perf_counter()
        for token_id in output[first : first + chunk]:
            step(token_id)
        spent.append(time.perf_counter() - began)
    return spent


def best_us_per_token(rounds: list[list[float]], tokens: int) -> float:
    """Each chunk's best time over the rounds, summed: a pause in one round does not count."""
    return sum(min(times) for times in zip(*rounds, strict=True)) / tokens * 1e6


def side_by_side() -> list[str]:
    """Part 2: the solution against DecodeStream on every family, the two taking turns."""
    print("\nlab-04 vs DecodeStream, every family, the same Rust decode "
          f"({SIDE_BY_SIDE_TOKENS} tokens, each 256-token chunk's best of {ROUNDS} rounds, µs per token)")
    print(f"{'family':<9}{'stream':<8}{'solution':>10}{'DecodeStream':>14}{'ratio':>8}")
    worst = (0.0, "")
    for family, load in HF_FAMILIES.items():
        raw, encoder = load(), load_tokenizer(family)  # (the Hugging Face copies of mistral and tekken only decode)
        for kind in ("ascii", "cjk", "emoji"):
            ids = encoder.encode(STREAMS[kind] * (SIDE_BY_SIDE_TOKENS // 2))[:SIDE_BY_SIDE_TOKENS]
            prompt, output = ids[:SIDE_BY_SIDE_PROMPT], ids[SIDE_BY_SIDE_PROMPT:]
            ours: list[list[float]] = []
            theirs: list[list[float]] = []
            for _ in range(ROUNDS):
                ours.append(chunk_seconds(solution_on(raw), prompt, output))
                theirs.append(chunk_seconds(decode_stream_on(raw), prompt, output))
            us, them = best_us_per_token(ours, len(output)), best_us_per_token(theirs, len(output))
            worst = max(worst, (us / them, f"{family} {kind}"))
            print(f"{family:<9}{kind:<8}{us:>10.2f}{them:>14.2f}{us / them:>7.2f}x")
    return [f"lab-04 vs DecodeStream per token on ASCII, CJK and emoji, five families: at most {worst[0]:.2f}x "
            f"({worst[1]}; target <= {TARGET}x)"]


def on_the_protocol() -> list[str]:
    """Part 3: the solution over the course's own tokenizer protocol (``HFTokenizer``: every id checked, as the
    tests and the grading sandbox give it) against vLLM's Fast detokenizer's work and DecodeStream, on the shipped
    BPE, all taking turns."""
    raw = hf_bpe_tokenizer()
    wrapped, encoder = HFTokenizer(raw), load_tokenizer("bpe")
    lab = load_lab("lab-04")
    methods: dict[str, Starter] = {
        "on HFTokenizer": lambda prompt: lab.IncrementalDetokenizer(wrapped, prompt).push,
        "on the raw Tokenizer": solution_on(raw),
        "vLLM Fast (model)": lambda prompt: VllmFastShaped(raw, prompt).push,
        "DecodeStream": decode_stream_on(raw),
        "decode of 4 ids alone": decode_alone_on(wrapped),
        "its decodes alone": decode_alone_on(wrapped),  # (both replaced below by a replay of each stream's decodes)
        "the same, raw": decode_alone_on(wrapped),
    }
    load = os.getloadavg()[0]
    print("\nlab-04 on the course's tokenizer protocol (HFTokenizer) vs vLLM's Fast detokenizer and DecodeStream, "
          f"shipped BPE ({SIDE_BY_SIDE_TOKENS} tokens, each 256-token chunk's best of {ROUNDS} rounds, µs per token; "
          f"load average {load:.1f} on {os.cpu_count()} CPUs)")
    print(f"{'stream':<8}" + "".join(f"{name:>22}" for name in methods) + f"{'vs DecodeStream':>17}{'vs vLLM':>9}")
    worst, worst_vllm, worst_raw, floor, its_floor, raw_vllm = 0.0, 0.0, 0.0, 0.0, 0.0, 0.0
    for kind in ("ascii", "cjk", "emoji"):
        ids = encoder.encode(STREAMS[kind] * (SIDE_BY_SIDE_TOKENS // 2))[:SIDE_BY_SIDE_TOKENS]
        prompt, output = ids[:SIDE_BY_SIDE_PROMPT], ids[SIDE_BY_SIDE_PROMPT:]
        methods["its decodes alone"] = its_decodes_alone_on(wrapped, output)
        methods["the same, raw"] = its_decodes_alone_on(raw, output)
        rounds: dict[str, list[list[float]]] = {name: [] for name in methods}
        for _ in range(ROUNDS):
            for name, start in methods.items():
                rounds[name].append(chunk_seconds(start, prompt, output))
        us = {name: best_us_per_token(times, len(output)) for name, times in rounds.items()}
        ratio, ratio_vllm = us["on HFTokenizer"] / us["DecodeStream"], us["on HFTokenizer"] / us["vLLM Fast (model)"]
        worst, worst_vllm = max(worst, ratio), max(worst_vllm, ratio_vllm)
        floor = max(floor, us["decode of 4 ids alone"] / us["DecodeStream"])
        its_floor = max(its_floor, us["its decodes alone"] / us["DecodeStream"])
        worst_raw = max(worst_raw, us["on the raw Tokenizer"] / us["DecodeStream"])
        raw_vllm = max(raw_vllm, us["the same, raw"] / us["vLLM Fast (model)"])
        print(f"{kind:<8}" + "".join(f"{us[name]:>22.2f}" for name in methods) + f"{ratio:>16.2f}x{ratio_vllm:>8.2f}x")
    return [f"lab-04 on HFTokenizer per token, shipped BPE, ASCII/CJK/emoji: at most {worst:.2f}x DecodeStream "
            f"(target <= {PROTOCOL_TARGET}x), {worst_vllm:.2f}x a model of vLLM's Fast detokenizer (target <= 1x); "
            f"load average {load:.1f}; floors, no bookkeeping: HFTokenizer.decode of 4 ids alone {floor:.2f}x, of the "
            f"windows this solution decodes {its_floor:.2f}x DecodeStream; on the raw Tokenizer (no id check) at most "
            f"{worst_raw:.2f}x DecodeStream; its decodes on the raw Tokenizer alone, no bookkeeping: {raw_vllm:.2f}x "
            "the vLLM model"]


def main() -> list[str]:
    return growth() + side_by_side() + on_the_protocol()


if __name__ == "__main__":
    print("\n".join(main()))
