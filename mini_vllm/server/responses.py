"""``POST /v1/responses`` (OpenAI's Responses API): lab-07's typed events over lab-02's pipeline.

The same engine and pipeline as Chat Completions; only the framing differs: lab-07's
``ResponsesEventFormatter`` turns each step into events, sent as server-sent events with an
``event:`` line each. A non-streamed request runs the very same formatter and takes its body
from the events (lab-07's ``build_response``), so the two can never disagree.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from types import ModuleType
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response

from mini_vllm.api.errors import ApiError
from mini_vllm.api.protocol import check_model
from mini_vllm.api.response_bodies import ResponseBody, error_responses
from mini_vllm.api.responses_request import ResponsesRequest, from_responses
from mini_vllm.engine import Engine
from mini_vllm.server.bodies import body_doc, read_body, small_body
from mini_vllm.server.events import EventFraming, event_frames, whole_body
from mini_vllm.server.runner import (
    Step,
    admit,
    generate,
    not_implemented,
    prepare,
    respond,
)

SSE_EVENTS = {"text/event-stream": {"schema": {"description": "with stream=true: server-sent events, each with an "
                                                               "`event:` line naming its type"}}}
ERROR_STATUSES = (400, 404, 413, 500, 501, 503)
LIFECYCLE = frozenset({"response.created", "response.in_progress", "response.completed", "response.incomplete",
                       "response.failed"})


def responses_router(engine: Engine, model_name: str, labs: Callable[[], tuple[ModuleType, ModuleType]]) -> APIRouter:
    """The route over ``engine``; ``labs()`` gives lab-02's and lab-07's modules."""
    router = APIRouter()

    @router.post("/v1/responses", responses={200: {"model": ResponseBody, "content": SSE_EVENTS},
                                             **error_responses(*ERROR_STATUSES)},
                 openapi_extra=body_doc(ResponsesRequest))
    async def responses(request: Request) -> Response:
        body = await read_body(request, ResponsesRequest)
        check_model(body.model, model_name)
        generation = await prepare(engine, lambda: from_responses(body), prefix="resp", inline=small_body(request),
                                   request=request)
        req = generation.request
        lab2, lab7 = labs()
        try:
            output = lab2.OutputPipeline(engine.tokenizer, generation.prompt_ids, generation.params,
                                         parse_tool_calls=req.parse_tool_calls, parse_reasoning=True,
                                         starts_in_reasoning=req.enable_thinking)
            formatter = lab7.ResponsesEventFormatter(generation.request_id, model_name, int(time.time()),
                                                     input_tokens=len(generation.prompt_ids))
        except NotImplementedError as error:
            raise not_implemented(error) from None
        await admit(request, engine, generation)
        framing = ResponsesFraming(formatter, not req.parallel_tool_calls, request_echo(body))
        return await respond(request, generate(engine, generation, output, framing), req.stream,
                             event_frames(lambda error: error_event(error, formatter)),
                             lambda events: whole_body(events, lab7.build_response))

    return router


def request_echo(body: ResponsesRequest) -> dict[str, Any]:
    """What a Response object says back about its request: the tools offered, the tool choice, parallel calls."""
    return {"tools": [tool.model_dump() for tool in body.tools or ()],
            "tool_choice": body.tool_choice or "auto", "parallel_tool_calls": body.parallel_tool_calls is not False}


class ResponsesFraming(EventFraming):
    """lab-07's events, with the request's own settings in every ``response`` object the lifecycle events carry.

    (lab-07's formatter knows nothing of the request's tools: it writes ``"tools": []``.)
    """

    def __init__(self, formatter: Any, one_call: bool, echo: dict[str, Any]) -> None:
        super().__init__(formatter, one_call)
        self.echo = echo

    def start(self) -> Step:
        return self.stamp(super().start())

    def end(self, last: Any, completion_tokens: int) -> Step:
        return self.stamp(super().end(last, completion_tokens))

    def fail(self, error: ValueError) -> Step | None:
        return self.stamp(super().fail(error) or [])

    def stamp(self, events: Step) -> Step:
        for event in events:
            if event.get("type") in LIFECYCLE and isinstance(event.get("response"), dict):
                event["response"].update(self.echo)
        return events


def error_event(error: ApiError, formatter: Any) -> dict[str, Any]:
    """A stub or a bug mid-stream, as the Responses API reports an error in-band."""
    return {"type": "error", "sequence_number": getattr(formatter, "sequence_number", 0), "code": error.code,
            "message": error.message, "param": error.param}
