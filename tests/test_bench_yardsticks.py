"""The throughput goal is a ratio, so its yardsticks must send what the server sends.

``make bench`` holds the server against bare FastAPI endpoints (``bench/bare_endpoints.py``)
and checks at run time that they sent as many bytes. These tests pin more: event for event,
the bare pipeline endpoint and the server on "free" labs send the server's own stream (the
request id and the clock aside). If the server's framing changes and the yardstick does not,
the ratio would compare different work; this fails first. No timing here: wall clock is for
``make bench`` only.
"""

from __future__ import annotations

import asyncio
import re

import httpx
import pytest
from fastapi import FastAPI

from bench.bare_endpoints import free_labs, pipeline_app
from bench.bench_server import PROMPT, request_body
from mini_vllm.server import create_app
from mini_vllm.serving import MODEL_NAME, build_engine


def stream_of(app: FastAPI) -> list[str]:
    """The ``data:`` events ``app`` streams for the benchmark's request, with its id and clock blanked."""

    async def read() -> str:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://bench") as client:
            response = await client.post("/v1/chat/completions", json=request_body())
            assert response.status_code == 200, response.text
            return response.text

    text = asyncio.run(read())
    text = re.sub(r'"id":"chatcmpl-[0-9a-f]{24}"', '"id":"chatcmpl-…"', text)
    text = re.sub(r'"created":\d+', '"created":…', text)
    return [event for event in text.split("\n\n") if event]


@pytest.mark.parametrize("tokenizer", ["byte", "bpe"])
def test_the_bare_endpoints_send_the_servers_own_stream(tokenizer: str) -> None:
    server = stream_of(create_app(build_engine(tokenizer), MODEL_NAME))
    assert len(server) > 1000, "the benchmark's reply should be long: thousands of events"
    assert server[-1] == "data: [DONE]" and '"usage"' in server[-2]
    bare = stream_of(pipeline_app(build_engine(tokenizer)))
    assert bare == server, "bare FastAPI over the same pipeline must send the server's stream, event for event"
    engine = build_engine(tokenizer)
    free = stream_of(create_app(engine, MODEL_NAME, pipeline=free_labs(engine, PROMPT)))  # type: ignore[arg-type]
    assert free == server, "the server on free labs must send what it sends on lab-02, event for event"
