"""The server against a bare FastAPI SSE endpoint that sends the same chunks: the cost of the shell.

Both run the same stack (FastAPI, Starlette's StreamingResponse, uvicorn) in a process of their
own, and the same client reads both. The bare endpoint does nothing but send, one event per
engine step, the exact ``data:`` lines the real server sent for the same request (recorded
first): no engine, no pipeline, no dicts, no JSON. The real one runs everything: request
model, tokenizing in a worker thread, the engine, lab-02's pipeline, chunk shaping, SSE framing.
Their ratio is how close the shell comes to the ceiling of its own web stack (goal: >= 0.8x).

Measured at 1 and 16 concurrent streams, byte and BPE tokenizers, best of a few rounds each,
the two servers taking turns so that a busy machine slows both alike.
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import socket
import time
from typing import Any

import httpx
from fastapi import FastAPI, Request
from fastapi.responses import StreamingResponse

from mini_vllm.serving import MODEL_NAME

PROMPT = "long"  # the toy model's longest reply: thousands of tokens, text, CJK and emoji
ROUNDS = 3


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def request_body(stream_options: bool = True) -> dict[str, Any]:
    return {"model": MODEL_NAME, "messages": [{"role": "user", "content": PROMPT}], "stream": True,
            "stream_options": {"include_usage": True}}


def bare_app(events: list[list[str]]) -> Any:
    """FastAPI with one route that sends ``events`` (per engine step, the SSE lines the real server sent)."""
    app = FastAPI()

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> StreamingResponse:
        await request.body()

        async def replay() -> Any:
            for step in events:
                await asyncio.sleep(0)  # the engine's turn between steps, as in the real server
                for line in step:
                    yield line

        return StreamingResponse(replay(), media_type="text/event-stream")

    return app


def run_server(kind: str, tokenizer: str, port: int, events: list[list[str]] | None) -> None:
    import uvicorn

    if kind == "bare":
        app = bare_app(events or [])
    else:
        from mini_vllm.serving import build_engine
        from mini_vllm.server import create_app

        app = create_app(build_engine(tokenizer))
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off")


class Server:
    """One of the two servers in a process of its own."""

    def __init__(self, kind: str, tokenizer: str, events: list[list[str]] | None = None) -> None:
        self.port = free_port()
        context = multiprocessing.get_context("spawn")
        self.process = context.Process(target=run_server, args=(kind, tokenizer, self.port, events), daemon=True)

    def __enter__(self) -> Server:
        self.process.start()
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.post(f"http://127.0.0.1:{self.port}/v1/chat/completions", json={}, timeout=5)
                return self
            except httpx.TransportError:
                if time.monotonic() > deadline or not self.process.is_alive():
                    raise RuntimeError("the benchmark server did not start") from None
                time.sleep(0.05)

    def __exit__(self, *exc: object) -> None:
        self.process.terminate()
        self.process.join(timeout=10)


def record_events(tokenizer: str) -> tuple[list[list[str]], int]:
    """The real server's SSE lines for the request, grouped as sent, and the completion tokens (from usage)."""
    with Server("real", tokenizer) as server, httpx.Client(timeout=120) as client, client.stream(
            "POST", f"http://127.0.0.1:{server.port}/v1/chat/completions", json=request_body()) as response:
        lines = [line for line in response.iter_lines() if line]
    usage = next(json.loads(line[6:])["usage"] for line in lines if '"usage"' in line and line.startswith("data: {"))
    return [[line + "\n\n"] for line in lines], int(usage["completion_tokens"])


async def read_streams(port: int, streams: int) -> tuple[float, int]:
    """``streams`` concurrent streamed requests; the seconds until the last ends, and the bytes received."""
    async with httpx.AsyncClient(timeout=120, limits=httpx.Limits(max_connections=streams)) as client:

        async def one() -> int:
            received = 0
            async with client.stream("POST", f"http://127.0.0.1:{port}/v1/chat/completions",
                                     json=request_body()) as response:
                async for piece in response.aiter_raw():
                    received += len(piece)
            return received

        await one()  # warm up: connection, first-request costs
        began = time.perf_counter()
        sizes = await asyncio.gather(*(one() for _ in range(streams)))
        return time.perf_counter() - began, sum(sizes)


def compare(tokenizer: str) -> list[tuple[int, float, float, float]]:
    """Per stream count: (streams, real tokens/s, bare tokens/s, ratio)."""
    events, tokens = record_events(tokenizer)
    rows = []
    with Server("real", tokenizer) as real, Server("bare", tokenizer, events) as bare:
        for streams in (1, 16):
            best = {"real": float("inf"), "bare": float("inf")}
            sizes = {}
            for _ in range(ROUNDS):
                for name, server in (("bare", bare), ("real", real)):
                    seconds, size = asyncio.run(read_streams(server.port, streams))
                    best[name] = min(best[name], seconds)
                    sizes[name] = size
            assert sizes["real"] == sizes["bare"], f"the two servers sent different bytes: {sizes}"
            real_rate, bare_rate = streams * tokens / best["real"], streams * tokens / best["bare"]
            rows.append((streams, real_rate, bare_rate, real_rate / bare_rate))
    return rows


def main() -> list[str]:
    print("\nserver vs a bare FastAPI SSE endpoint sending the same chunks (separate processes, same client)")
    print(f"{'tokenizer':>10} {'streams':>8} {'server tok/s':>14} {'bare tok/s':>12} {'ratio':>7}")
    headlines = []
    for tokenizer in ("byte", "bpe"):
        for streams, real, bare, ratio in compare(tokenizer):
            print(f"{tokenizer:>10} {streams:>8} {real:14,.0f} {bare:12,.0f} {ratio:6.2f}x")
            headlines.append(f"server vs bare FastAPI SSE ({tokenizer}, {streams} stream{'s' * (streams > 1)}): "
                             f"{ratio:.2f}x (target >= 0.8x)")
    return headlines


if __name__ == "__main__":
    print("\n".join(main()))
