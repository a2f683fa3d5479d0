"""lab-04: per-token cost of the incremental detokenizer at several stream lengths.

Every method runs on the same real tokenizer backend (the shipped BPE loaded by
Hugging Face ``tokenizers``, whose ``decode`` is Rust), on four kinds of stream:
ASCII, CJK characters the vocabulary splits, emoji, and real U+FFFD characters.

- solution: the lab's IncrementalDetokenizer (whatever LAB_IMPL selects);
- original window-diff: the lesson's first fix, a full-history decode per split character;
- DecodeStream: Hugging Face's streaming decoder.

Per-token cost *at length N* is measured on the last 128 tokens of an N-token stream:
the tokens before them are given as the prompt and the first 16 pushed untimed (so a
one-time cost, like DecodeStream decoding its whole prompt at the first step, is not
counted), then 128 tokens are timed. That keeps the quadratic baselines measurable at
64k tokens. On the U+FFFD stream the original window-diff looks cheap because it shows
nothing at all until flush.

The second half runs the same measurement on the SentencePiece family (the shipped
``spm_tokenizer.json``, Metaspace + byte fallback), where Thai, emoji and these CJK
characters arrive as one ``<0xNN>`` token per byte: the solution against ``DecodeStream``
on the same file, ASCII, CJK, emoji and Thai streams.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from tokenizers.decoders import DecodeStream

from bench.common import Row, cost, print_table, save_plot
from mini_vllm.hf import HFTokenizer, hf_bpe_tokenizer, hf_spm_tokenizer
from mini_vllm.labs import load_lab
from mini_vllm.testing.baselines import OriginalWindowDiff

SIZES = (256, 4096, 65536)
WARM_UP = 16
TIMED = 128
STREAMS = {
    "ascii": "The quick brown fox jumps over the lazy dog. ",
    "cjk": "服务器乱码字节",  # characters the shipped BPE cuts into several tokens
    "emoji": "🫨🚀😊🍜",
    "fffd": "\ufffd",
}

SPM_STREAMS = {
    "ascii": "The quick brown fox jumps over the lazy dog. ",
    "cjk": "服务器乱码字节",  # three <0xNN> tokens per character
    "emoji": "🫨🚀😊🍜",  # four per character
    "thai": "สวัสดีครับวันนี้อากาศดีมาก",  # three per character, and no spaces: one long byte run
}

# A method takes (prompt, output) and returns a step function to call once per output token.
Starter = Callable[[Sequence[int]], Callable[[int], object]]


def methods(family: str = "bpe") -> dict[str, Starter]:
    lab = load_lab("lab-04")
    raw = hf_bpe_tokenizer() if family == "bpe" else hf_spm_tokenizer()
    tokenizer = HFTokenizer(raw)

    def solution(prompt: Sequence[int]) -> Callable[[int], object]:
        return lab.IncrementalDetokenizer(tokenizer, prompt).push

    def original(prompt: Sequence[int]) -> Callable[[int], object]:
        return OriginalWindowDiff(tokenizer, prompt).push

    def decode_stream(prompt: Sequence[int]) -> Callable[[int], object]:
        stream = DecodeStream(ids=list(prompt), skip_special_tokens=False)
        return lambda token_id: stream.step(raw, token_id)

    if family == "spm":
        return {"solution": solution, "DecodeStream": decode_stream}
    return {"solution": solution, "original window-diff": original, "DecodeStream": decode_stream}


def per_token_us(start: Starter, ids: Sequence[int], repeats: int = 5) -> float:
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


def main() -> list[str]:
    tokenizer = HFTokenizer(hf_bpe_tokenizer())
    headlines = []
    for kind, text in STREAMS.items():
        ids = tokenizer.encode(text * (max(SIZES) // 2))[: max(SIZES)]
        rows = [Row(name, n, per_token_us(start, ids[:n])) for n in SIZES for name, start in methods().items()]
        print_table(f"lab-04 incremental detokenizer, {kind} stream (shipped BPE, HF backend)", rows, "solution")
        save_plot(f"lab04-{kind}", f"lab-04: per-token cost, {kind} stream", rows)
        if kind == "cjk":
            for method in ("solution", "original window-diff"):
                growth = cost(rows, method, SIZES[-1]) / cost(rows, method, SIZES[0])
                target = "target <= 1.5x" if method == "solution" else "expected to grow"
                headlines.append(
                    f"lab-04 {method} on CJK, per-token cost {SIZES[-1]} vs {SIZES[0]}: {growth:.2f}x ({target})"
                )
    headlines += spm_family()
    return headlines


def spm_family() -> list[str]:
    """lab-04 on the SentencePiece file, with DecodeStream on the same file, in the same run."""
    tokenizer = HFTokenizer(hf_spm_tokenizer())
    headlines = []
    for kind, text in SPM_STREAMS.items():
        ids = tokenizer.encode(text * (max(SIZES) // 2))[: max(SIZES)]
        rows = [Row(name, n, per_token_us(start, ids[:n])) for n in SIZES for name, start in methods("spm").items()]
        print_table(f"lab-04 incremental detokenizer, {kind} stream (shipped spm, HF backend)", rows, "solution")
        save_plot(f"lab04-spm-{kind}", f"lab-04 on spm: per-token cost, {kind} stream", rows)
        growth = cost(rows, "solution", SIZES[-1]) / cost(rows, "solution", SIZES[0])
        versus = ", ".join(f"{n}: {cost(rows, 'solution', n) / cost(rows, 'DecodeStream', n):.2f}x" for n in SIZES)
        headlines.append(f"lab-04 on spm, {kind}: per-token cost {SIZES[-1]} vs {SIZES[0]} tokens {growth:.2f}x "
                         f"(target <= 1.5x); solution / DecodeStream {versus}")
    return headlines


if __name__ == "__main__":
    print("\n".join(main()))
