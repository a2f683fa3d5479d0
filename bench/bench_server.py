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
import orjson
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


def bare_app(events: list[str], serialise: bool) -> Any:
    """FastAPI with one route that sends ``events``: the ``data:`` payloads the real server sent.

    ``serialise``: hold each chunk as a dict and turn it into JSON per event (with orjson, as the
    server does), as an endpoint that has its chunks ready would; otherwise replay the exact
    bytes (nothing left but sending).
    """
    app = FastAPI()
    held: list[Any] = [json.loads(event) if serialise and event != "[DONE]" else event for event in events]

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> StreamingResponse:
        await request.body()

        async def send() -> Any:
            for event in held:
                await asyncio.sleep(0)  # a turn for the others between events, as the engine's step gives
                # the server's own serialiser, so the ratio is not a contest of JSON libraries
                yield b"data: " + (orjson.dumps(event) if isinstance(event, dict) else event.encode()) + b"\n\n"

        return StreamingResponse(send(), media_type="text/event-stream")

    return app


def run_server(kind: str, tokenizer: str, port: int, events: list[str] | None) -> None:
    import uvicorn

    if kind in ("replay", "serialise"):
        app = bare_app(events or [], serialise=kind == "serialise")
    else:
        from mini_vllm.server import create_app
        from mini_vllm.serving import build_engine

        app = create_app(build_engine(tokenizer))
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off")


class Server:
    """One of the two servers in a process of its own."""

    def __init__(self, kind: str, tokenizer: str, events: list[str] | None = None) -> None:
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


def record_events(tokenizer: str) -> tuple[list[str], int]:
    """The real server's ``data:`` payloads for the request, and the completion tokens (from usage)."""
    with Server("real", tokenizer) as server, httpx.Client(timeout=120) as client, client.stream(
            "POST", f"http://127.0.0.1:{server.port}/v1/chat/completions", json=request_body()) as response:
        lines = [line for line in response.iter_lines() if line]
    usage = next(json.loads(line[6:])["usage"] for line in lines if '"usage"' in line and line.startswith("data: {"))
    return [line.removeprefix("data: ") for line in lines], int(usage["completion_tokens"])


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


BASELINES = ("serialise", "replay")


def compare(tokenizer: str) -> list[tuple[int, float, dict[str, float]]]:
    """Per stream count: (streams, the server's tokens/s, each bare endpoint's tokens/s)."""
    events, tokens = record_events(tokenizer)
    rows = []
    with Server("real", tokenizer) as real, Server("serialise", tokenizer, events) as serialise, \
            Server("replay", tokenizer, events) as replay:
        servers = {"real": real, "serialise": serialise, "replay": replay}
        for streams in (1, 16):
            best = dict.fromkeys(servers, float("inf"))
            sizes = {}
            for _ in range(ROUNDS):
                for name, server in servers.items():
                    seconds, size = asyncio.run(read_streams(server.port, streams))
                    best[name] = min(best[name], seconds)
                    sizes[name] = size
            assert len(set(sizes.values())) == 1, f"the servers sent different bytes: {sizes}"
            rates = {name: streams * tokens / seconds for name, seconds in best.items()}
            rows.append((streams, rates.pop("real"), rates))
    return rows


def main() -> list[str]:
    print("\nserver vs bare FastAPI SSE endpoints sending the same chunks (each in its own process, same client)")
    print("  serialise: holds the chunk dicts, JSON per event; replay: sends the recorded bytes")
    print(f"{'tokenizer':>10} {'streams':>8} {'server tok/s':>13} {'serialise tok/s':>16} {'ratio':>6}"
          f" {'replay tok/s':>13} {'ratio':>6}")
    headlines = []
    for tokenizer in ("byte", "bpe"):
        for streams, real, bare in compare(tokenizer):
            ratios = {name: real / rate for name, rate in bare.items()}
            print(f"{tokenizer:>10} {streams:>8} {real:13,.0f} {bare['serialise']:16,.0f} {ratios['serialise']:5.2f}x"
                  f" {bare['replay']:13,.0f} {ratios['replay']:5.2f}x")
            headlines.append(f"server vs bare FastAPI SSE ({tokenizer}, {streams} stream{'s' * (streams > 1)}): "
                             f"{ratios['serialise']:.2f}x of a serialising endpoint, {ratios['replay']:.2f}x of a "
                             "byte replay (target >= 0.8x)")
    return headlines


if __name__ == "__main__":
    print("\n".join(main()))
