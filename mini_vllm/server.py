"""An OpenAI-compatible HTTP server for mini_vllm (FastAPI + uvicorn, as vLLM's api_server.py).

The shell does the HTTP work: routes, request checks, error bodies, SSE framing, usage,
and aborting a request when its client goes away. What the user actually reads is made
by lab-02's output pipeline, loaded through the LAB_IMPL loader, so ``LAB_IMPL=starter``
serves the student's own code.
"""

from __future__ import annotations

import dataclasses
import json
import time
import uuid
from collections.abc import AsyncIterator
from types import ModuleType
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from mini_vllm.engine import Engine
from mini_vllm.kv_pool import NoFreeBlocks
from mini_vllm.labs import load_lab
from mini_vllm.protocol import ApiError, GenerationRequest, parse_body, parse_request


def error_response(error: ApiError) -> JSONResponse:
    return JSONResponse(error.body(), status_code=error.status)


def not_implemented(error: NotImplementedError) -> ApiError:
    """A stub in the student's pipeline: say which task, as a 501 the tests turn back into the error."""
    return ApiError(501, f"NotImplementedError: {error}", type="not_implemented", code="not_implemented")


def pipeline_failed(error: Exception) -> ApiError:
    """The pipeline raised (a malformed tool call, say): an OpenAI error, never a silently shortened reply."""
    code = "invalid_model_output" if isinstance(error, ValueError) else "internal_error"
    return ApiError(500, f"{type(error).__name__}: {error}", type="server_error", code=code)


def sse(payload: dict[str, Any]) -> str:
    return f"data: {json.dumps(payload, ensure_ascii=False)}\n\n"


REASONING_FIELDS = ("reasoning", "reasoning_content")


def create_app(engine: Engine, model_name: str = "mini-vllm", pipeline: ModuleType | None = None,
               reasoning: bool = True, reasoning_field: str = "reasoning") -> FastAPI:
    """The app. ``pipeline`` is the module with ``OutputPipeline`` and ``ChunkFormatter`` (default: lab-02).

    ``reasoning``: split a chat reply's ``<think>`` thought into its own channel (lab-06).
    ``reasoning_field``: its name on the wire: ``reasoning`` (vLLM today) or
    ``reasoning_content`` (DeepSeek's API, older vLLM).
    """
    if reasoning_field not in REASONING_FIELDS:
        raise ValueError(f"reasoning_field must be one of {REASONING_FIELDS}, got {reasoning_field!r}")
    lab = pipeline or load_lab("lab-02")
    app = FastAPI(title="mini_vllm", version="0.1.0")
    app.state.engine = engine

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        model = {"id": model_name, "object": "model", "created": 0, "owned_by": "mini_vllm"}
        return {"object": "list", "data": [model]}

    @app.get("/debug/kv")
    async def kv() -> dict[str, Any]:
        """Not OpenAI: lets a test watch an aborted request give its KV blocks back."""
        return {"free_blocks": engine.pool.num_free_blocks, "total_blocks": engine.pool.num_blocks,
                "running": sorted(engine.running), "aborted": engine.stats.aborted[-50:]}

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> Response:
        return await handle(request, "chat")

    @app.post("/v1/completions")
    async def completions(request: Request) -> Response:
        return await handle(request, "completion")

    async def handle(request: Request, kind: str) -> Response:
        try:
            req = parse_request(parse_body(await request.body()), kind, model_name)
        except ApiError as error:
            return error_response(error)
        if not req.stream:
            req = dataclasses.replace(req, include_usage=True)  # a whole response always reports usage
        request_id = f"{'chatcmpl' if kind == 'chat' else 'cmpl'}-{uuid.uuid4().hex[:24]}"
        prompt_ids = engine.tokenizer.encode(req.prompt)
        try:
            output = lab.OutputPipeline(engine.tokenizer, prompt_ids, req.params, parse_tool_calls=kind == "chat",
                                        parse_reasoning=reasoning and kind == "chat",
                                        starts_in_reasoning=reasoning and req.enable_thinking)
            formatter = lab.ChunkFormatter(kind, request_id, model_name, int(time.time()))
        except NotImplementedError as error:
            return error_response(not_implemented(error))
        try:
            engine.admit(request_id, len(prompt_ids))
        except NoFreeBlocks as error:
            return error_response(ApiError(503, f"the KV cache is full, retry later ({error})",
                                           type="server_error", code="kv_cache_full"))
        chunks = run_request(engine, req, request_id, prompt_ids, output, formatter, reasoning_field)
        if req.stream:
            return StreamingResponse(sse_stream(chunks), media_type="text/event-stream")
        try:
            collected = [chunk async for chunk in chunks]
        except NotImplementedError as error:
            return error_response(not_implemented(error))
        except Exception as error:
            return error_response(pipeline_failed(error))
        return JSONResponse(merge_chunks(collected, kind, reasoning_field))

    return app


async def run_request(engine: Engine, req: GenerationRequest, request_id: str, prompt_ids: list[int],
                      output: Any, formatter: Any, reasoning_field: str = "reasoning") -> AsyncIterator[dict[str, Any]]:
    """Engine token ids -> the lab's pipeline -> OpenAI chunks. The request is aborted however this ends early."""
    completion_tokens, engine_reason = 0, "stop"
    try:
        async for step in engine.generate(request_id, prompt_ids, req.user_message, req.params):
            completion_tokens += len(step.token_ids)
            ids = step.token_ids[0] if len(step.token_ids) == 1 else list(step.token_ids)
            for chunk in shape_reasoning(formatter.chunks(output.push(ids)), req, reasoning_field):
                yield chunk
            if output.stopped:  # a stop string: the reply is over, stop spending compute on it
                break
            engine_reason = step.finish_reason or engine_reason
        for chunk in shape_reasoning(formatter.chunks(output.finish(engine_reason)), req, reasoning_field):
            yield chunk
        if req.include_usage:
            yield formatter.usage_chunk(len(prompt_ids), completion_tokens)
    finally:
        engine.abort(request_id)  # no-op when it finished; frees the blocks after a stop string or a disconnect


def shape_reasoning(chunks: list[dict[str, Any]], req: GenerationRequest, field: str) -> list[dict[str, Any]]:
    """The thought as the client asked for it: under ``field``, or not at all (``include_reasoning: false``).

    The pipeline always separates the thought (so it never leaks into the answer); this is
    only about what goes on the wire. A chunk left with nothing to say is dropped.
    """
    shaped = []
    for chunk in chunks:
        emptied = False
        for choice in chunk.get("choices", []):
            delta = choice.get("delta")
            if delta and "reasoning" in delta:
                thought = delta.pop("reasoning")
                if req.include_reasoning:
                    delta[field] = thought
                emptied = emptied or (not delta and not choice.get("finish_reason"))
        if not emptied:
            shaped.append(chunk)
    return shaped


async def sse_stream(chunks: AsyncIterator[dict[str, Any]]) -> AsyncIterator[str]:
    try:
        async for chunk in chunks:
            yield sse(chunk)
    except NotImplementedError as error:  # a stub reached mid-stream: report it in-band, as OpenAI does
        yield sse(not_implemented(error).body())
    except Exception as error:
        yield sse(pipeline_failed(error).body())
    yield "data: [DONE]\n\n"


def merge_chunks(chunks: list[dict[str, Any]], kind: str, reasoning_field: str = "reasoning") -> dict[str, Any]:
    """The non-streaming response: exactly what the stream would have said, put together."""
    first = next((c for c in chunks if c.get("choices")), None)
    choices = [c["choices"][0] for c in chunks if c.get("choices")]
    finish_reason = next((c.get("finish_reason") for c in reversed(choices) if c.get("finish_reason")), None)
    stop_reason = next((c.get("stop_reason") for c in reversed(choices) if c.get("stop_reason")), None)
    usage = next((c["usage"] for c in chunks if c.get("usage")), None)
    base = {"id": first["id"] if first else "", "created": first["created"] if first else 0,
            "model": first["model"] if first else "", "usage": usage}
    if kind == "completion":
        text = "".join(c.get("text", "") for c in choices)
        choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish_reason,
                  "stop_reason": stop_reason}
        return {**base, "object": "text_completion", "choices": [choice]}
    content = "".join(c["delta"].get("content") or "" for c in choices)
    tool_calls: dict[int, dict[str, Any]] = {}  # index -> the call, its argument fragments joined
    for entry in (e for c in choices for e in c["delta"].get("tool_calls") or []):
        if entry["index"] not in tool_calls:
            tool_calls[entry["index"]] = {"id": entry["id"], "type": entry["type"],
                                          "function": {"name": entry["function"]["name"], "arguments": ""}}
        tool_calls[entry["index"]]["function"]["arguments"] += entry["function"].get("arguments", "")
    message: dict[str, Any] = {"role": "assistant", "content": content or (None if tool_calls else "")}
    thought = "".join(c["delta"].get(reasoning_field) or "" for c in choices)
    if thought:
        message[reasoning_field] = thought
    if tool_calls:
        message["tool_calls"] = [tool_calls[index] for index in sorted(tool_calls)]
    choice = {"index": 0, "message": message, "logprobs": None, "finish_reason": finish_reason,
              "stop_reason": stop_reason}
    return {**base, "object": "chat.completion", "choices": [choice]}
