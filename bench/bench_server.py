"""The server against bare FastAPI SSE endpoints that send the same bytes: what the shell costs.

Every server runs the same stack (FastAPI, Starlette's StreamingResponse, uvicorn) in a
process of its own, and the same client reads them all; the bytes they send are checked equal.

- **pipeline** (the yardstick of the goal, >= 0.8x): bare FastAPI over the same engine and the
  same lab-02 pipeline, with nothing else. The ratio is the price of the server's strictness:
  typed request models, the error middleware, tokenizing in a worker thread, chunk shaping,
  disconnect and abort handling.
- **replay**: sends the recorded bytes, no engine, no pipeline: the web stack's own ceiling.
- **free labs**: the real server with lab-02 replaced by a replay of lab-02's chunks. Against
  replay, it shows what the engine and the shell cost when the labs cost nothing; what is
  left between it and the real server is the labs' per-token Python.

Measured at 1 and 16 concurrent streams, byte and BPE tokenizers, best of a few rounds each,
the servers taking turns so that a busy machine slows all of them alike.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import multiprocessing
import socket
import time
from dataclasses import dataclass
from typing import Any

import httpx

from bench.bare_endpoints import free_labs, pipeline_app, replay_app
from mini_vllm.serving import MODEL_NAME

PROMPT = "long"  # the toy model's longest reply: thousands of tokens, text, CJK and emoji
ROUNDS = 3


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def request_body() -> dict[str, Any]:
    return {"model": MODEL_NAME, "messages": [{"role": "user", "content": PROMPT}], "stream": True,
            "stream_options": {"include_usage": True}}


def run_server(kind: str, tokenizer: str, port: int, events: list[bytes] | None) -> None:
    import uvicorn

    from mini_vllm.server import create_app
    from mini_vllm.serving import build_engine

    if kind == "replay":
        app = replay_app(events or [])
    elif kind == "pipeline":
        app = pipeline_app(build_engine(tokenizer))
    elif kind == "free labs":
        engine = build_engine(tokenizer)
        app = create_app(engine, MODEL_NAME, pipeline=free_labs(engine, PROMPT))  # type: ignore[arg-type]
    else:
        app = create_app(build_engine(tokenizer), MODEL_NAME)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off")


class Server:
    """One server (``kind``: one of SERVERS) in a process of its own."""

    def __init__(self, kind: str, tokenizer: str, events: list[bytes] | None = None) -> None:
        self.port = free_port()
        context = multiprocessing.get_context("spawn")
        self.process = context.Process(target=run_server, args=(kind, tokenizer, self.port, events), daemon=True)

    def __enter__(self) -> Server:
        self.process.start()
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(f"http://127.0.0.1:{self.port}/", timeout=5)  # any answer (a 404) means it is up
                return self
            except httpx.TransportError:
                if time.monotonic() > deadline or not self.process.is_alive():
                    raise RuntimeError("the benchmark server did not start") from None
                time.sleep(0.05)

    def __exit__(self, *exc: object) -> None:
        self.process.terminate()
        self.process.join(timeout=10)


def record_events(tokenizer: str) -> tuple[list[bytes], int]:
    """The real server's events for the request, each as sent (``data: ...``), and the completion tokens."""
    with Server("real", tokenizer) as server, httpx.Client(timeout=120) as client, client.stream(
            "POST", f"http://127.0.0.1:{server.port}/v1/chat/completions", json=request_body()) as response:
        lines = [line for line in response.iter_lines() if line]
    usage = next(json.loads(line[6:])["usage"] for line in lines if '"usage"' in line and line.startswith("data: {"))
    return [f"{line}\n\n".encode() for line in lines], int(usage["completion_tokens"])


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


SERVERS = ("real", "pipeline", "replay", "free labs")


@dataclass(frozen=True)
class Rates:
    """Tokens per second of each server at one stream count."""

    streams: int
    of: dict[str, float]

    def ratio(self, server: str, yardstick: str) -> float:
        return self.of[server] / self.of[yardstick]


def compare(tokenizer: str) -> list[Rates]:
    """Each server's tokens/s at 1 and 16 streams, the servers taking turns round by round."""
    events, tokens = record_events(tokenizer)
    rows = []
    with contextlib.ExitStack() as running:
        servers = {name: running.enter_context(Server(name, tokenizer, events)) for name in SERVERS}
        for streams in (1, 16):
            best = dict.fromkeys(servers, float("inf"))
            sizes = {}
            for _ in range(ROUNDS):
                for name, server in servers.items():
                    seconds, size = asyncio.run(read_streams(server.port, streams))
                    best[name] = min(best[name], seconds)
                    sizes[name] = size
            assert len(set(sizes.values())) == 1, f"the servers sent different bytes: {sizes}"
            rows.append(Rates(streams, {name: streams * tokens / seconds for name, seconds in best.items()}))
    return rows


def main() -> list[str]:
    print("\nthe server vs bare FastAPI SSE endpoints sending the same bytes (each in its own process, same client)")
    print("  pipeline: bare FastAPI over the same engine and lab-02 pipeline (the yardstick, goal >= 0.8x)")
    print("  replay: sends the recorded bytes; free labs: the server with every lab replaced by a replay")
    print(f"{'tokenizer':>10} {'streams':>8} {'server tok/s':>13} {'pipeline tok/s':>15} {'ratio':>6}"
          f" {'replay tok/s':>13} {'ratio':>6} {'free labs/replay':>17}")
    headlines = []
    for tokenizer in ("byte", "bpe"):
        for rates in compare(tokenizer):
            of = rates.of
            print(f"{tokenizer:>10} {rates.streams:>8} {of['real']:13,.0f} {of['pipeline']:15,.0f}"
                  f" {rates.ratio('real', 'pipeline'):5.2f}x {of['replay']:13,.0f}"
                  f" {rates.ratio('real', 'replay'):5.2f}x {rates.ratio('free labs', 'replay'):16.2f}x")
            headlines.append(
                f"server vs bare FastAPI SSE ({tokenizer}, {rates.streams} stream{'s' * (rates.streams > 1)}): "
                f"{rates.ratio('real', 'pipeline'):.2f}x of bare FastAPI over the same pipeline (goal >= 0.8x); "
                f"{rates.ratio('real', 'replay'):.2f}x of a byte replay, {rates.ratio('free labs', 'replay'):.2f}x "
                "with every lab free")
    return headlines


if __name__ == "__main__":
    print("\n".join(main()))
