"""lab-02: throughput of the output pipeline, alone and behind the HTTP server.

- pipeline alone: token ids of the toy model's long reply (shipped BPE tokenizer) pushed
  through OutputPipeline; tokens/s and µs per token (the pipeline's overhead);
- over HTTP: the real server on 127.0.0.1 and the official openai client, streaming the
  same reply to 1 client and to 16 concurrent clients; tokens/s counted from the usage
  the server reports. Server and clients share this machine's two cores.

Each at 1 and 3 token ids per engine step (``--tokens-per-step``, as a speculative
decoder hands over its accepted tokens): the pipeline's per-step overhead is shared by
more tokens, and the output is the same.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import openai

from mini_vllm.labs import load_lab
from mini_vllm.sampling import SamplingParams
from mini_vllm.serving import MODEL_NAME, BackgroundServer, build_engine
from mini_vllm.toy_scripts import script_for


def pipeline_alone(tokenizer_name: str, tokens_per_step: int = 1, repeats: int = 5) -> tuple[float, int]:
    lab = load_lab("lab-02")
    tokenizer = build_engine(tokenizer_name).tokenizer
    ids = [*tokenizer.encode(script_for("long")), tokenizer.eos_token_id]
    k = tokens_per_step
    steps: list[int | list[int]] = list(ids) if k == 1 else [ids[i : i + k] for i in range(0, len(ids), k)]
    prompt = tokenizer.encode("long")
    best = float("inf")
    for _ in range(repeats):
        pipeline = lab.OutputPipeline(tokenizer, prompt, SamplingParams(max_tokens=len(ids)), parse_tool_calls=True)
        push = pipeline.push
        began = time.perf_counter()
        for step in steps:
            push(step)
        pipeline.finish("stop")
        best = min(best, time.perf_counter() - began)
    return best, len(ids)


def stream_once(base_url: str) -> int:
    client = openai.OpenAI(base_url=base_url, api_key="not-needed", max_retries=0, timeout=120)
    stream = client.chat.completions.create(model=MODEL_NAME, messages=[{"role": "user", "content": "long"}],
                                            stream=True, stream_options={"include_usage": True})
    tokens = 0
    for chunk in stream:
        if chunk.usage:
            tokens = chunk.usage.completion_tokens
    return tokens


def over_http(tokenizer_name: str, clients: int, tokens_per_step: int = 1) -> float:
    with BackgroundServer(build_engine(tokenizer_name, tokens_per_step=tokens_per_step)) as server:
        stream_once(server.base_url)  # warm up
        began = time.perf_counter()
        with ThreadPoolExecutor(clients) as pool:
            tokens = sum(pool.map(lambda _: stream_once(server.base_url), range(clients)))
        return tokens / (time.perf_counter() - began)


def main() -> list[str]:
    headlines = []
    print("\nlab-02 output pipeline (toy model's long reply)")
    columns = ("tokenizer", "k", "pipeline tok/s", "µs/token", "HTTP 1 stream tok/s", "HTTP 16 streams tok/s")
    widths = (10, 3, 15, 9, 20, 22)
    print(" ".join(f"{c:>{w}}" for c, w in zip(columns, widths, strict=True)))
    for name in ("byte", "bpe"):
        for k in (1, 3):
            seconds, tokens = pipeline_alone(name, k)
            overhead = seconds / tokens * 1e6
            one, sixteen = over_http(name, 1, k), over_http(name, 16, k)
            print(f"{name:>10} {k:>3} {tokens / seconds:15,.0f} {overhead:9.2f} {one:20,.0f} {sixteen:22,.0f}")
            headlines.append(f"lab-02 pipeline overhead ({name}, {k} tokens/step): {overhead:.2f} µs/token "
                             "(target <= 20)")
            headlines.append(f"lab-02 over HTTP to one openai client ({name}, {k} tokens/step): {one:,.0f} tokens/s "
                             "(target >= 5,000)")
    return headlines


if __name__ == "__main__":
    print("\n".join(main()))
