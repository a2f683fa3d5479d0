"""lab-04 on real vocabularies: Mistral 7B's SentencePiece and Tekken, from the mistral-common wheel.

Four ways to stream the same ids, side by side, at 256 to 64k tokens:

- solution: lab-04's IncrementalDetokenizer (whatever LAB_IMPL selects) on the course's adapter,
  so every ``decode`` it asks for is the vendor library's own (sentencepiece, tiktoken, each
  behind mistral-common's Python wrapper);
- solution (HF decode): the same class on the decode-only Hugging Face copy of the vocabulary,
  to tell the algorithm's cost from the decode backend's;
- DecodeStream: Hugging Face's streaming decoder. It loads neither file, but a decode-only
  ``tokenizers`` copy of each vocabulary is rebuilt from the wheel (``mini_vllm.tokenizers.hf``), so it runs
  on the same ids with Hugging Face's decoder for that family;
- vendor full decode: the naive server, the vendor library decoding the whole reply again at every
  token and sending what grew. Its cost per token grows with the stream.

Per-token cost at length N is timed on the last 128 tokens of an N-token stream, the rest given
as the prompt (as in ``bench_lab04``), so the quadratic baseline stays measurable at 64k tokens.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from tokenizers import Tokenizer as HFRawTokenizer
from tokenizers.decoders import DecodeStream

from bench.bench_lab04 import Starter, per_token_us
from bench.common import Row, cost, print_table, save_plot
from mini_vllm import Tokenizer, load_tokenizer
from mini_vllm.labs import load_lab
from mini_vllm.tokenizers.hf import HFTokenizer, hf_mistral_tokenizer, hf_tekken_tokenizer

SIZES = (256, 1024, 4096, 65536)
STREAMS = {
    "ascii": "The quick brown fox jumps over the lazy dog. ",
    "cjk": "服务器乱码字节，今日の東京は晴れです。",
    "emoji": "🫨🚀😊🍜",
    "thai": "สวัสดีครับวันนี้อากาศดีมาก",
}
VOCABULARIES: dict[str, Callable[[], HFRawTokenizer]] = {"mistral": hf_mistral_tokenizer, "tekken": hf_tekken_tokenizer}


def methods(tokenizer: Tokenizer, raw: HFRawTokenizer) -> dict[str, Starter]:
    lab = load_lab("lab-04")
    on_hf = HFTokenizer(raw, eos_token="</s>")

    def solution(prompt: Sequence[int]) -> Callable[[int], object]:
        return lab.IncrementalDetokenizer(tokenizer, prompt).push

    def solution_on_hf(prompt: Sequence[int]) -> Callable[[int], object]:
        return lab.IncrementalDetokenizer(on_hf, prompt).push

    def decode_stream(prompt: Sequence[int]) -> Callable[[int], object]:
        stream = DecodeStream(ids=list(prompt), skip_special_tokens=False)
        return lambda token_id: stream.step(raw, token_id)

    def full_decode(prompt: Sequence[int]) -> Callable[[int], object]:
        ids = list(prompt)
        shown = [len(tokenizer.decode(ids))]

        def step(token_id: int) -> str:
            ids.append(token_id)
            text = tokenizer.decode(ids)
            if text.endswith("\ufffd"):
                return ""  # a character still arriving (the naive server's only care)
            new, shown[0] = text[shown[0] :], len(text)
            return new

        return step

    return {"solution": solution, "solution (HF decode)": solution_on_hf, "DecodeStream": decode_stream,
            "vendor full decode": full_decode}


def main() -> list[str]:
    headlines = []
    for family, rebuild in VOCABULARIES.items():
        tokenizer, raw = load_tokenizer(family), rebuild()
        for kind, text in STREAMS.items():
            ids = tokenizer.encode(text * (max(SIZES) // 2))[: max(SIZES)]
            rows = [Row(name, n, per_token_us(start, ids[:n], repeats=1 if name == "vendor full decode" else 5))
                    for n in SIZES for name, start in methods(tokenizer, raw).items()]
            print_table(f"lab-04 on {family} (real vocabulary, vendor decode), {kind} stream", rows, "solution")
            save_plot(f"lab04-{family}-{kind}", f"lab-04 on {family}: per-token cost, {kind} stream", rows)
            growth = {m: cost(rows, m, SIZES[-1]) / cost(rows, m, 1024) for m in ("solution", "vendor full decode")}
            versus = {m: cost(rows, m, SIZES[-1]) / cost(rows, "DecodeStream", SIZES[-1])
                      for m in ("solution", "solution (HF decode)")}
            headlines.append(
                f"lab-04 on {family}, {kind}: per-token cost 64k vs 1k tokens {growth['solution']:.2f}x "
                "(target <= 1.5x), "
                f"vendor full decode {growth['vendor full decode']:.0f}x; / DecodeStream at 64k: solution "
                f"{versus['solution']:.1f}x, on HF decode {versus['solution (HF decode)']:.1f}x")
    return headlines


if __name__ == "__main__":
    print("\n".join(main()))
