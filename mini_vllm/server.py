"""An OpenAI-compatible HTTP server for mini_vllm (FastAPI + uvicorn, as vLLM's api_server.py).

The shell does the HTTP work: typed request bodies (``api_models``), error bodies
(``api_errors``), CPU work off the event loop, SSE framing, usage, and aborting a request
when its client goes away. What the user actually reads is made by lab-02's output pipeline,
loaded through the LAB_IMPL loader, so ``LAB_IMPL=starter`` serves the student's own code.

The plumbing a route needs (prepare in a worker thread, admit, stream or collect with
disconnect detection) is in :class:`Generation` and the functions below it, so another API's
routes (``/v1/responses``, ``/v1/messages``) can reuse it with their own event framing.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from types import ModuleType, SimpleNamespace
from typing import Any, TypeVar

import orjson
from fastapi import FastAPI, Request
from fastapi.openapi.utils import get_openapi
from fastapi.responses import JSONResponse, Response, StreamingResponse
from pydantic import BaseModel, ValidationError

from mini_vllm.api_errors import (
    MAX_BODY_BYTES,
    ApiError,
    dumps,
    error_response,
    install_error_handling,
    validation_error,
)
from mini_vllm.api_models import (
    SSE_DOC,
    ChatCompletionRequest,
    ChatCompletionResponse,
    CompletionRequest,
    CompletionResponse,
    ModelCard,
    ModelList,
    error_responses,
)
from mini_vllm.engine import Engine
from mini_vllm.kv_pool import NoFreeBlocks
from mini_vllm.labs import load_lab
from mini_vllm.protocol import GenerationRequest, check_model, context_exceeded, from_chat, from_completion

__all__ = ["ApiError", "create_app", "error_response", "sse"]

T = TypeVar("T")


def not_implemented(error: NotImplementedError) -> ApiError:
    """A stub in the student's pipeline: say which task, as a 501 the tests turn back into the error."""
    return ApiError(501, f"NotImplementedError: {error}", type="not_implemented", code="not_implemented")


def pipeline_failed(error: Exception) -> ApiError:
    """The pipeline raised (a malformed tool call, say): an OpenAI error, never a silently shortened reply."""
    code = "invalid_model_output" if isinstance(error, ValueError) else "internal_error"
    return ApiError(500, f"{type(error).__name__}: {error}", type="server_error", code=code)


@contextlib.contextmanager
def lab_errors_as_api_errors() -> Iterator[None]:
    """Around code that runs a lab's whole response: a stub becomes the 501 that names its task,
    any other failure of the lab's code a 500 in the API's error shape; an ApiError passes as it is."""
    try:
        yield
    except NotImplementedError as error:
        raise not_implemented(error) from None
    except ApiError:
        raise
    except Exception as error:
        raise pipeline_failed(error) from error


def sse(payload: dict[str, Any]) -> str:
    return f"data: {dumps(payload)}\n\n"


REASONING_FIELDS = ("reasoning", "reasoning_content")
ERRORS = error_responses(400, 404, 413, 500, 501, 503)


def create_app(engine: Engine, model_name: str = "mini-vllm", pipeline: ModuleType | None = None,
               reasoning: bool = True, reasoning_field: str = "reasoning",
               max_body_bytes: int = MAX_BODY_BYTES) -> FastAPI:
    """The app. ``pipeline`` is the module with ``OutputPipeline`` and ``ChunkFormatter`` (default: lab-02).

    ``reasoning``: split a chat reply's ``<think>`` thought into its own channel (lab-06).
    ``reasoning_field``: its name on the wire: ``reasoning`` (vLLM today) or
    ``reasoning_content`` (DeepSeek's API, older vLLM).
    """
    if reasoning_field not in REASONING_FIELDS:
        raise ValueError(f"reasoning_field must be one of {REASONING_FIELDS}, got {reasoning_field!r}")
    lab = pipeline or load_lab("lab-02")
    app = FastAPI(title="mini_vllm", version="0.1.0", description="An OpenAI-compatible server for a toy model")
    install_error_handling(app, max_body_bytes)
    app.state.engine = engine
    card = ModelCard(id=model_name, object="model", created=0, owned_by="mini_vllm",
                     max_model_len=engine.max_model_len)

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/v1/models", response_model=ModelList)
    async def models() -> ModelList:
        return ModelList(object="list", data=[card])

    @app.get("/v1/models/{model_id:path}", response_model=ModelCard, responses=error_responses(404))
    async def model(model_id: str) -> ModelCard:
        check_model(model_id, model_name)
        return card

    @app.get("/debug/kv", include_in_schema=False)
    async def kv() -> dict[str, Any]:
        """Not OpenAI: lets a test watch an aborted request give its KV blocks back."""
        return {"free_blocks": engine.pool.num_free_blocks, "total_blocks": engine.pool.num_blocks,
                "running": sorted(engine.running), "aborted": engine.stats.aborted[-50:]}

    @app.post("/v1/chat/completions", responses={200: {"model": ChatCompletionResponse, "content": SSE_DOC}, **ERRORS},
              openapi_extra=request_body_doc(app, ChatCompletionRequest))
    async def chat(request: Request) -> Response:
        body = await read_body(request, ChatCompletionRequest)
        check_model(body.model, model_name)
        return await openai_response(request, await prepare(engine, lambda: from_chat(body)), "chat")

    @app.post("/v1/completions", responses={200: {"model": CompletionResponse, "content": SSE_DOC}, **ERRORS},
              openapi_extra=request_body_doc(app, CompletionRequest))
    async def completions(request: Request) -> Response:
        body = await read_body(request, CompletionRequest)
        check_model(body.model, model_name)
        return await openai_response(request, await prepare(engine, lambda: from_completion(body)), "completion")

    async def openai_response(request: Request, generation: Generation, kind: str) -> Response:
        """Chat Completions and Completions: the lab-02 pipeline, then OpenAI chunks, streamed or merged."""
        req = generation.request
        try:
            output = lab.OutputPipeline(engine.tokenizer, generation.prompt_ids, generation.params,
                                        parse_tool_calls=req.parse_tool_calls,
                                        parse_reasoning=reasoning and kind == "chat",
                                        starts_in_reasoning=reasoning and req.enable_thinking)
            formatter = lab.ChunkFormatter(kind, generation.request_id, model_name, int(time.time()))
        except NotImplementedError as error:
            raise not_implemented(error) from None
        admit(engine, generation)
        chunks = run_request(engine, generation, output, formatter, reasoning_field)
        if req.stream:
            return StreamingResponse(sse_stream(chunks), media_type="text/event-stream")
        with lab_errors_as_api_errors():
            collected = await cancel_on_disconnect(request, collect(chunks))
        if collected is None:  # the client left: nobody reads this, the request is already aborted
            return Response(status_code=499)
        return JSONResponse(merge_chunks(collected, kind, reasoning_field))

    from mini_vllm.server_events import add_event_routes  # imports this module's plumbing: imported last
    add_event_routes(app, engine, model_name, pipeline)  # POST /v1/responses and /v1/messages (lab-07)
    app.openapi = lambda: openapi_without_422(app)  # type: ignore[method-assign]
    return app


def openapi_without_422(app: FastAPI) -> dict[str, Any]:
    """The OpenAPI document, with the request models of :func:`request_body_doc` as components.

    FastAPI documents a 422 ``{"detail": [...]}`` on every route with parameters; this server
    answers those with a 400 in OpenAI's shape (as OpenAI does), so the document drops it.
    """
    if app.openapi_schema is None:
        document = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes)
        schemas = document.setdefault("components", {}).setdefault("schemas", {})
        for model in getattr(app.state, "body_models", ()):
            schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
            schemas.update(schema.pop("$defs", {}))
            schemas[model.__name__] = schema
        for operations in document.get("paths", {}).values():
            for operation in operations.values():
                operation.get("responses", {}).pop("422", None)
        for unused in ("HTTPValidationError", "ValidationError"):
            schemas.pop(unused, None)
        app.openapi_schema = document
    return app.openapi_schema


# ----------------------------------------------------------------- plumbing any generating route can reuse


@dataclass(frozen=True)
class Generation:
    """A request ready for the engine: its id, the prompt's token ids, the engine's parameters."""

    request: GenerationRequest
    request_id: str
    prompt_ids: list[int]
    params: Any  # SamplingParams


M = TypeVar("M", bound=BaseModel)


def request_body_doc(app: FastAPI, model: type[BaseModel]) -> dict[str, Any]:
    """The ``openapi_extra`` of a route whose body :func:`read_body` reads: documents ``model`` as its body."""
    app.state.body_models = [*getattr(app.state, "body_models", []), model]
    return {"requestBody": {"required": True, "content": {"application/json": {
        "schema": {"$ref": f"#/components/schemas/{model.__name__}"}}}}}


async def read_body(request: Request, model: type[M]) -> M:
    """The request body as ``model``, parsed and validated in a worker thread, or an ApiError (400).

    FastAPI would parse the JSON on the event loop, where a 10 MB body holds every other
    stream for as long as it takes. Any content type is read as JSON, as OpenAI does.
    """
    raw = await request.body()
    return await asyncio.to_thread(parse_body, raw, model)


def parse_body(raw: bytes, model: type[M]) -> M:
    try:
        data = json.loads(raw)
    except RecursionError as error:
        raise ApiError(400, "the request body is JSON nested too deeply to read", code="invalid_json") from error
    except ValueError as error:  # JSONDecodeError, or bytes that are not UTF-8
        raise ApiError(400, f"the request body is not valid JSON: {error}", code="invalid_json") from error
    if not isinstance(data, dict):
        raise ApiError(400, "the request body must be a JSON object", code="invalid_json")
    try:
        return model.model_validate(data)
    except ValidationError as error:
        raise validation_error(error.errors()) from None


async def prepare(engine: Engine, build: Callable[[], GenerationRequest], prefix: str = "") -> Generation:
    """Build the prompt and tokenize it in a worker thread, then fix the parameters to the context left.

    Tokenizing a long prompt is pure Python: on the event loop, one 10 MB prompt would freeze
    every other stream (and /health) until it was done. In a thread, the loop keeps its turns.
    """
    def work() -> tuple[GenerationRequest, list[int]]:
        req = build()
        return req, encode_prompt(engine, req.prompt)

    req, prompt_ids = await asyncio.to_thread(work)
    params = req.sampling_params(len(prompt_ids), engine.max_model_len)
    prefix = prefix or ("chatcmpl" if req.kind == "chat" else "cmpl")
    return Generation(req, f"{prefix}-{uuid.uuid4().hex[:24]}", prompt_ids, params)


def encode_prompt(engine: Engine, prompt: str) -> list[int]:
    """The prompt's ids, or a 400 at once when even the fewest tokens it could make exceed the context."""
    size = len(prompt.encode("utf-8"))
    if size > engine.max_model_len * engine.max_token_bytes:  # cheap: no need to tokenize to know it is too long
        raise context_exceeded(-(-size // engine.max_token_bytes), engine.max_model_len, at_least=True)
    return engine.tokenizer.encode(prompt)


def admit(engine: Engine, generation: Generation) -> None:
    """Take KV blocks for the prompt: a 400 if it can never fit the cache, a 503 if only not right now."""
    try:
        engine.admit(generation.request_id, len(generation.prompt_ids))
    except NoFreeBlocks as error:
        if len(generation.prompt_ids) + 1 > engine.pool.num_blocks * engine.pool.block_size:
            raise context_exceeded(len(generation.prompt_ids), engine.pool.num_blocks * engine.pool.block_size) \
                from error
        raise ApiError(503, f"the KV cache is full right now, retry later ({error})", type="server_error",
                       code="kv_cache_full") from error


async def collect(steps: AsyncIterator[list[T]]) -> list[T]:
    return [chunk async for chunks in steps for chunk in chunks]


async def wait_for_disconnect(request: Request) -> None:
    """Return when the client hangs up. The body is already read, so the next message is the disconnect."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


async def cancel_on_disconnect(request: Request, work: Awaitable[T]) -> T | None:
    """Run ``work`` unless the client leaves first; then cancel it (its ``finally`` aborts the engine request).

    A streamed response notices a disconnect when a write fails; a whole response writes
    nothing until the end, so it has to listen for the disconnect (vLLM's ``with_cancellation``).
    """
    task = asyncio.ensure_future(work)
    watcher = asyncio.ensure_future(wait_for_disconnect(request))
    try:
        await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        watcher.cancel()
    if task.done():
        return task.result()
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    return None


async def run_request(engine: Engine, generation: Generation, output: Any, formatter: Any,
                      reasoning_field: str = "reasoning") -> AsyncIterator[list[dict[str, Any]]]:
    """Engine token ids -> the lab's pipeline -> OpenAI chunks, a list per engine step (often one chunk).

    The request is aborted however this ends early (a stop string, a disconnect, an error).
    """
    req, request_id = generation.request, generation.request_id
    completion_tokens, engine_reason = 0, "stop"
    shape = ChunkShaper(req, reasoning_field)
    push, chunks_of = output.push, formatter.chunks  # looked up once: this loop runs for every token
    try:
        async for step in engine.generate(request_id, generation.prompt_ids, req.user_message, generation.params):
            completion_tokens += len(step.token_ids)
            ids = step.token_ids[0] if len(step.token_ids) == 1 else list(step.token_ids)
            chunks = shape(chunks_of(push(ids)))
            if chunks:
                yield chunks
            if output.stopped:  # a stop string: the reply is over, stop spending compute on it
                break
            engine_reason = step.finish_reason or engine_reason
        last = shape(chunks_of(finish(output, engine_reason)))
        if req.include_usage or not req.stream:  # a whole response always reports usage
            last.append(formatter.usage_chunk(len(generation.prompt_ids), completion_tokens))
        yield last
    finally:
        engine.abort(request_id)  # no-op when it finished; frees the blocks after a stop string or a disconnect


def finish(output: Any, engine_reason: str) -> Any:
    """The pipeline's last output. The one rule the shell adds: a stop string may fall inside a tool call.

    The stop wins, as in vLLM, whose stop check sees the model's text before any parser:
    the reply ends there. The call it cut is left as far as it was sent (its name and the
    argument fragments before the stop), and the reply finishes with "stop", not an error:
    the client asked for the cut. (The pipeline reports the cut call as malformed, so its
    stop_reason is lost; the shell sends ``stop_reason: null`` then.)
    """
    try:
        return output.finish(engine_reason)
    except ValueError:
        if not output.stopped:
            raise
        return SimpleNamespace(text="", reasoning="", tool_calls=[], tool_call_deltas=[], finish_reason="stop",
                               stop_reason=None)


class ChunkShaper:
    """The chunks as the client asked for them: the thought under its field name, or not at all
    (``include_reasoning: false``); with ``parallel_tool_calls: false``, the first call only.

    The pipeline always separates the thought (so it never leaks into the answer); this is
    only about what goes on the wire. A chunk left with nothing to say is dropped.
    """

    def __init__(self, req: GenerationRequest, field: str) -> None:
        self.include_reasoning, self.field = req.include_reasoning, field
        self.one_call = not req.parallel_tool_calls
        self.as_is = self.include_reasoning and field == "reasoning" and not self.one_call  # nothing to change

    def __call__(self, chunks: list[dict[str, Any]]) -> list[dict[str, Any]]:
        if self.as_is:
            return chunks
        shaped = []
        for chunk in chunks:
            emptied = False
            for choice in chunk.get("choices", ()):
                delta = choice.get("delta")
                if not delta:
                    continue
                if "reasoning" in delta:
                    thought = delta.pop("reasoning")
                    if self.include_reasoning:
                        delta[self.field] = thought
                if self.one_call and "tool_calls" in delta:
                    kept = [entry for entry in delta["tool_calls"] if entry["index"] == 0]
                    if kept:
                        delta["tool_calls"] = kept
                    else:
                        del delta["tool_calls"]
                emptied = emptied or (not delta and not choice.get("finish_reason"))
            if not emptied:
                shaped.append(chunk)
        return shaped


async def sse_stream(steps: AsyncIterator[list[dict[str, Any]]]) -> AsyncIterator[bytes]:
    """Each step's chunks as ``data:`` events, written together (one write per engine step).

    orjson, not the standard library: serialising the chunk was the largest single cost of a
    token on the wire (about 8 µs of the stdlib's against under 1 µs), and it hands back the
    UTF-8 bytes the socket wants. Every string in a chunk is valid Unicode (decoded text, and
    request strings checked by ``protocol.check_unicode``), which orjson insists on.
    """
    try:
        async for chunks in steps:
            yield b"".join([b"data: " + orjson.dumps(chunk) + b"\n\n" for chunk in chunks])
    except NotImplementedError as error:  # a stub reached mid-stream: report it in-band, as OpenAI does
        yield sse(not_implemented(error).body()).encode()
    except Exception as error:
        yield sse(pipeline_failed(error).body()).encode()
    yield b"data: [DONE]\n\n"


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
