"""The yardsticks ``bench_server`` holds the server against: FastAPI endpoints that send the same bytes.

Each answers ``POST /v1/chat/completions`` for the benchmark's one request (a single user
message, streamed, with usage), and sends exactly the ``data:`` events the real server sends
for it. They differ in how much of the server's work they do:

- :func:`pipeline_app`: the least a FastAPI server can do and still generate: the same engine
  and the same lab-02 pipeline, the same orjson framing, one write per engine step, and
  nothing else (no typed request model, no middleware, no worker thread, no chunk shaping, no
  abort). The server's strictness is the only difference, so the ratio is what it costs.
- :func:`replay_app`: no engine, no pipeline: it sends the bytes recorded from the real server,
  one event per turn of the event loop. The ceiling of the web stack itself.
- :func:`free_labs`: not an endpoint but a stand-in for lab-02 that the *real* server loads: it
  hands back the chunks lab-02 made for the same request, recorded first. The real server on
  it shows what the engine and the shell cost when every lab costs nothing.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any, NamedTuple

import orjson
from fastapi import FastAPI, Request
from fastapi.responses import StreamingResponse

from mini_vllm.engine import Engine
from mini_vllm.labs import load_lab
from mini_vllm.sampling import SamplingParams

Chunk = dict[str, Any]


def chatml(user_message: str) -> str:
    """The server's chat template for one user message (``protocol.chat_prompt``), written out."""
    return f"<|im_start|>user\n{user_message}<|im_end|>\n<|im_start|>assistant\n"


class Lab02Request(NamedTuple):
    """What the server sets up for the benchmark's request before the first token."""

    prompt_ids: list[int]
    params: SamplingParams
    output: Any  # lab-02's OutputPipeline: no tools offered, thoughts parsed
    formatter: Any  # lab-02's ChunkFormatter, under a fresh request id


def lab02_for(engine: Engine, user_message: str) -> Lab02Request:
    lab = load_lab("lab-02")
    prompt_ids = engine.tokenizer.encode(chatml(user_message))
    params = SamplingParams(max_tokens=engine.max_model_len - len(prompt_ids))
    output = lab.OutputPipeline(engine.tokenizer, prompt_ids, params, parse_tool_calls=False, parse_reasoning=True)
    formatter = lab.ChunkFormatter("chat", f"chatcmpl-{uuid.uuid4().hex[:24]}", "mini-vllm", int(time.time()))
    return Lab02Request(prompt_ids, params, output, formatter)


def sse(chunks: list[Chunk]) -> bytes:
    return b"".join([b"data: " + orjson.dumps(chunk) + b"\n\n" for chunk in chunks])


def pipeline_app(engine: Engine) -> FastAPI:
    """Bare FastAPI over the same engine and lab-02 pipeline as the server (see the module docstring)."""
    app = FastAPI()

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> StreamingResponse:
        user_message = json.loads(await request.body())["messages"][-1]["content"]
        prompt_ids, params, output, formatter = lab02_for(engine, user_message)
        request_id = formatter.request_id

        async def send() -> AsyncIterator[bytes]:
            completion_tokens = 0
            async for step in engine.generate(request_id, prompt_ids, user_message, params):
                completion_tokens += len(step.token_ids)
                chunks = formatter.chunks(output.push(step.token_ids[0]))
                if chunks:
                    yield sse(chunks)
            last = formatter.chunks(output.finish("stop"))
            yield sse([*last, formatter.usage_chunk(len(prompt_ids), completion_tokens)]) + b"data: [DONE]\n\n"

        return StreamingResponse(send(), media_type="text/event-stream")

    return app


def replay_app(events: list[bytes]) -> FastAPI:
    """Bare FastAPI that sends ``events`` (the real server's writes, recorded), nothing more."""
    app = FastAPI()

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> StreamingResponse:
        await request.body()

        async def send() -> AsyncIterator[bytes]:
            for event in events:
                await asyncio.sleep(0)  # a turn for the others between events, as an engine step gives
                yield event

        return StreamingResponse(send(), media_type="text/event-stream")

    return app


def free_labs(engine: Engine, user_message: str) -> SimpleNamespace:
    """A stand-in for the lab-02 module whose every step costs nothing: it replays lab-02's chunks.

    The chunks are made first, by lab-02 itself, for the reply the engine gives ``user_message``;
    the server then gets them back one engine step at a time, with no decoding, no parsing and no
    dict building left to do. (Only for the benchmark's one request: it knows no other.)
    """
    prompt_ids, _, output, formatter = lab02_for(engine, user_message)
    reply = engine.model.reply_ids(user_message, prompt_ids)
    steps = [formatter.chunks(output.push(token_id)) for token_id in reply]
    last = formatter.chunks(output.finish("stop"))
    usage = formatter.usage_chunk(len(prompt_ids), len(reply))

    class OutputPipeline:
        stopped = False

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            self.made = iter(steps)

        def push(self, token_ids: Any) -> list[Chunk]:
            return next(self.made)

        def finish(self, engine_finish_reason: str) -> list[Chunk]:
            return last

    class ChunkFormatter:
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            pass

        def chunks(self, made: list[Chunk]) -> list[Chunk]:
            return list(made)  # a copy: the shell appends the usage chunk to the last list

        def usage_chunk(self, prompt_tokens: int, completion_tokens: int) -> Chunk:
            return usage

    return SimpleNamespace(OutputPipeline=OutputPipeline, ChunkFormatter=ChunkFormatter)
