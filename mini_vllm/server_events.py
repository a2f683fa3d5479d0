"""``POST /v1/responses`` (OpenAI Responses API) and ``POST /v1/messages`` (Anthropic Messages API).

The same engine and the same lab-02 pipeline as Chat Completions; only the framing differs:
lab-07's formatters (loaded through the LAB_IMPL loader) turn each StepOutput into typed
events, sent as server-sent events with an ``event:`` line each. A non-streamed request runs
the very same formatter and builds its body from the events (lab-07's ``build_response`` /
``build_message``), so the two can never disagree. Errors on ``/v1/messages`` use Anthropic's
body shape, everywhere else OpenAI's (``api_errors``).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from types import ModuleType
from typing import Any

import orjson
from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from mini_vllm.api_errors import ApiError, anthropic_error_body
from mini_vllm.api_models import error_responses
from mini_vllm.engine import Engine
from mini_vllm.event_models import (
    AnthropicErrorResponse,
    MessageBody,
    MessagesRequest,
    ResponseBody,
    ResponsesRequest,
    from_messages,
    from_responses,
)
from mini_vllm.labs import load_lab
from mini_vllm.protocol import check_model
from mini_vllm.server import (
    Generation,
    admit,
    cancel_on_disconnect,
    collect,
    finish,
    lab_errors_as_api_errors,
    not_implemented,
    pipeline_failed,
    prepare,
)

SSE_EVENTS = {"text/event-stream": {"schema": {"description": "with stream=true: server-sent events, each with an "
                                                               "`event:` line naming its type"}}}
ERROR_STATUSES = (400, 404, 413, 500, 501, 503)
ANTHROPIC_ERRORS: dict[int | str, dict[str, Any]] = {status: {"model": AnthropicErrorResponse}
                                                     for status in ERROR_STATUSES}


def add_event_routes(app: FastAPI, engine: Engine, model_name: str, pipeline: ModuleType | None = None,
                     events: ModuleType | None = None) -> None:
    """Add both routes to ``app``; ``pipeline`` is lab-02's module, ``events`` lab-07's (default: LAB_IMPL's)."""
    app.state.error_shapes["/v1/messages"] = anthropic_error_body
    app.include_router(event_router(engine, model_name, pipeline, events))


def event_router(engine: Engine, model_name: str, pipeline: ModuleType | None = None,
                 events: ModuleType | None = None) -> APIRouter:
    router = APIRouter()

    def labs() -> tuple[ModuleType, ModuleType]:
        return pipeline or load_lab("lab-02"), events or load_lab("lab-07")

    @router.post("/v1/responses", responses={200: {"model": ResponseBody, "content": SSE_EVENTS},
                                             **error_responses(*ERROR_STATUSES)})
    async def responses(body: ResponsesRequest, request: Request) -> Response:
        check_model(body.model, model_name)
        generation = await prepare(engine, lambda: from_responses(body), prefix="resp")
        lab2, lab7 = labs()
        make = lambda: lab7.ResponsesEventFormatter(  # noqa: E731
            generation.request_id, model_name, int(time.time()), input_tokens=len(generation.prompt_ids))
        return await respond(request, engine, generation, lab2, make, lab7.build_response, "responses")

    @router.post("/v1/messages", responses={200: {"model": MessageBody, "content": SSE_EVENTS}, **ANTHROPIC_ERRORS})
    async def messages(body: MessagesRequest, request: Request) -> Response:
        check_model(body.model, model_name)
        generation = await prepare(engine, lambda: from_messages(body), prefix="msg")
        lab2, lab7 = labs()
        make = lambda: lab7.MessagesEventFormatter(  # noqa: E731
            generation.request_id, model_name, input_tokens=len(generation.prompt_ids),
            send_thinking=body.thinking_enabled)
        return await respond(request, engine, generation, lab2, make, lab7.build_message, "messages")

    return router


async def respond(request: Request, engine: Engine, generation: Generation, lab2: ModuleType,
                  make_formatter: Callable[[], Any], build: Callable[[list[dict[str, Any]]], dict[str, Any]],
                  api: str) -> Response:
    """Stream the events, or collect them and answer with the body built from them."""
    req = generation.request
    try:
        output = lab2.OutputPipeline(engine.tokenizer, generation.prompt_ids, generation.params,
                                     parse_tool_calls=req.parse_tool_calls, parse_reasoning=True,
                                     starts_in_reasoning=req.enable_thinking)
        formatter = make_formatter()
    except NotImplementedError as error:
        raise not_implemented(error) from None
    admit(engine, generation)
    stream = run_events(engine, generation, output, formatter)
    if req.stream:
        return StreamingResponse(sse_events(stream, formatter, api), media_type="text/event-stream")
    with lab_errors_as_api_errors():
        collected = await cancel_on_disconnect(request, collect(stream))
        if collected is None:  # the client left: the request is already aborted
            return Response(status_code=499)
        failure = next((e for e in collected if e.get("type") in ("response.failed", "error")), None)
        if failure is not None:
            raise ApiError(500, failure_message(failure), type="server_error", code="invalid_model_output")
        return JSONResponse(build(collected))


def failure_message(event: dict[str, Any]) -> str:
    if event.get("type") == "response.failed":
        return str((event.get("response", {}).get("error") or {}).get("message", "the reply failed"))
    return str((event.get("error") or {}).get("message", "the reply failed"))


async def run_events(engine: Engine, generation: Generation, output: Any,
                     formatter: Any) -> AsyncIterator[list[dict[str, Any]]]:
    """Engine token ids -> lab-02's pipeline -> lab-07's events, a list per engine step (written together).

    A malformed call (the pipeline raises ``ValueError``) ends the stream the API's way:
    ``formatter.fail`` (``response.failed`` / an ``error`` event); what was sent stays sent.
    The request is aborted however this ends early (a stop string, a disconnect, an error).
    """
    req, request_id = generation.request, generation.request_id
    completion_tokens, engine_reason = 0, "stop"
    one_call = not req.parallel_tool_calls
    try:
        yield formatter.start()
        try:
            async for step in engine.generate(request_id, generation.prompt_ids, req.user_message, generation.params):
                completion_tokens += len(step.token_ids)
                out = output.push(step.token_ids[0] if len(step.token_ids) == 1 else list(step.token_ids))
                events = formatter.events(first_call_only(out) if one_call else out)
                if events:
                    yield events
                if output.stopped:  # a stop string: the reply is over
                    break
                engine_reason = step.finish_reason or engine_reason
            last = finish(output, engine_reason)
        except ValueError as error:
            yield formatter.fail(f"{type(error).__name__}: {error}")
            return
        yield [*formatter.events(first_call_only(last) if one_call else last),
               *formatter.finish(last.finish_reason, completion_tokens, last.stop_reason)]
    finally:
        engine.abort(request_id)  # no-op when it finished; frees the blocks after a stop string or a disconnect


def first_call_only(out: Any) -> Any:
    """``parallel_tool_calls: false`` / ``disable_parallel_tool_use``: the calls after the first are not sent."""
    out.tool_call_deltas = [delta for delta in out.tool_call_deltas if delta.index == 0]
    return out  # (the formatters read the deltas only)


def sse_event(event: dict[str, Any]) -> bytes:
    """One event on the wire: its type on the ``event:`` line, its JSON (orjson, as on the chat path) on ``data:``."""
    return b"event: " + str(event.get("type", "message")).encode() + b"\ndata: " + orjson.dumps(event) + b"\n\n"


async def sse_events(steps: AsyncIterator[list[dict[str, Any]]], formatter: Any, api: str) -> AsyncIterator[bytes]:
    """The events on the wire, a step's together. A stub or a bug mid-stream is reported in-band, each API's way."""
    try:
        async for events in steps:
            yield b"".join([sse_event(event) for event in events])
    except NotImplementedError as error:
        yield sse_event(error_event(not_implemented(error), formatter, api))
    except Exception as error:
        yield sse_event(error_event(pipeline_failed(error), formatter, api))


def error_event(error: ApiError, formatter: Any, api: str) -> dict[str, Any]:
    if api == "messages":
        return anthropic_error_body(error)
    return {"type": "error", "sequence_number": getattr(formatter, "sequence_number", 0), "code": error.code,
            "message": error.message, "param": error.param}
