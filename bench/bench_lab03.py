"""lab-03: per-token cost of the streaming detokenizer against the naive ways and real peers.

Same ByteTokenizer stream (multilingual text, one byte per token) for every method:
- solution: the lab's StreamingDetokenizer (whatever LAB_IMPL selects);
- per-token decode: decode([id]) alone (fast and wrong: the bug the lab fixes);
- full re-decode: decode(ids[:k]) every token (right and quadratic); timed on the last
  256 tokens of each stream, which is its per-token cost at that length;
- stdlib incremental: codecs' incremental UTF-8 decoder fed each token's bytes;
- DecodeStream: Hugging Face tokenizers' streaming decoder, on a real byte-level
  tokenizer with the same ids.
"""

from __future__ import annotations

import codecs
import time
from collections.abc import Sequence

from tokenizers.decoders import DecodeStream

from bench.common import Method, cost, measure, print_table, save_plot, time_stream
from mini_vllm import ByteTokenizer
from mini_vllm.labs import load_lab
from mini_vllm.tokenizers.hf import hf_byte_tokenizer

SIZES = (256, 4096, 65536)
TEXT = "Streaming 你好, naïve café — 日本語のテキスト 🚀🫨 and plain ASCII words. "
REDECODE_WINDOW = 256


def methods() -> dict[str, Method]:
    lab = load_lab("lab-03")
    tok = ByteTokenizer()
    hf = hf_byte_tokenizer()

    def solution(ids: Sequence[int]) -> None:
        detok = lab.StreamingDetokenizer(tok)
        feed = detok.feed
        for i in ids:
            feed(i)
        detok.flush()

    def per_token_decode(ids: Sequence[int]) -> None:
        for i in ids:
            tok.decode([i])

    def stdlib_incremental(ids: Sequence[int]) -> None:
        decode = codecs.getincrementaldecoder("utf-8")("replace").decode
        token_bytes = tok.decode_single_token_bytes
        for i in ids:
            decode(token_bytes(i))

    def decode_stream(ids: Sequence[int]) -> None:
        step = DecodeStream(skip_special_tokens=False).step
        for i in ids:
            step(hf, i)

    def full_redecode(ids: Sequence[int]) -> tuple[float, int]:
        window = min(REDECODE_WINDOW, len(ids))
        start = time.perf_counter()
        shown = 0
        for k in range(len(ids) - window + 1, len(ids) + 1):
            text = tok.decode(ids[:k])
            if not text.endswith("\ufffd"):
                shown = len(text)
        del shown
        return time.perf_counter() - start, window

    return {
        "solution": lambda ids: time_stream(solution, ids),
        "per-token decode": lambda ids: time_stream(per_token_decode, ids),
        "full re-decode": full_redecode,
        "stdlib incremental": lambda ids: time_stream(stdlib_incremental, ids),
        "DecodeStream": lambda ids: time_stream(decode_stream, ids),
    }


def main() -> list[str]:
    ids = ByteTokenizer().encode(TEXT * (max(SIZES) // len(TEXT.encode()) + 1))
    rows = measure(methods(), {n: ids[:n] for n in SIZES})
    print_table("lab-03 streaming detokenizer (ByteTokenizer, multilingual stream)", rows, reference="solution")
    print(f"plot: {save_plot('lab03', 'lab-03: per-token cost', rows)}")
    flat = cost(rows, "solution", SIZES[-1]) / cost(rows, "solution", SIZES[0])
    vs_peer = cost(rows, "solution", SIZES[-1]) / cost(rows, "DecodeStream", SIZES[-1])
    return [
        f"lab-03 solution per-token cost, {SIZES[-1]} vs {SIZES[0]} tokens: {flat:.2f}× (target <= 1.3×)",
        f"lab-03 solution vs DecodeStream per token at {SIZES[-1]}: {vs_peer:.2f}× (target <= 1.0×)",
    ]


if __name__ == "__main__":
    print("\n".join(main()))
