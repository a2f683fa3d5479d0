"""``POST /v1/messages`` (Anthropic's Messages API): lab-07's typed events over lab-02's pipeline.

As ``responses``, with lab-07's ``MessagesEventFormatter`` and ``build_message``; every error
on this path, in the body and in the stream, is in Anthropic's shape (``api_errors``).
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response

from mini_vllm.api.errors import anthropic_error_body
from mini_vllm.api.messages_request import MessagesRequest, from_messages
from mini_vllm.api.protocol import check_model
from mini_vllm.api.response_bodies import AnthropicErrorResponse, MessageBody
from mini_vllm.engine import Engine
from mini_vllm.server.bodies import body_doc, read_body, small_body
from mini_vllm.server.events import EventFraming, event_frames, whole_body
from mini_vllm.server.runner import (
    admit,
    generate,
    not_implemented,
    prepare,
    respond,
)

ERROR_STATUSES = (400, 404, 413, 500, 501, 503)
ANTHROPIC_ERRORS: dict[int | str, dict[str, Any]] = {status: {"model": AnthropicErrorResponse}
                                                     for status in ERROR_STATUSES}
SSE_EVENTS = {"text/event-stream": {"schema": {"description": "with stream=true: server-sent events, each with an "
                                                               "`event:` line naming its type"}}}


def messages_router(engine: Engine, model_name: str, labs: Callable[[], tuple[ModuleType, ModuleType]]) -> APIRouter:
    """The route over ``engine``; ``labs()`` gives lab-02's and lab-07's modules."""
    router = APIRouter()

    @router.post("/v1/messages", responses={200: {"model": MessageBody, "content": SSE_EVENTS}, **ANTHROPIC_ERRORS},
                 openapi_extra=body_doc(MessagesRequest))
    async def messages(request: Request) -> Response:
        body = await read_body(request, MessagesRequest)
        check_model(body.model, model_name)
        generation = await prepare(engine, lambda: from_messages(body), prefix="msg", inline=small_body(request),
                                   request=request)
        req = generation.request
        lab2, lab7 = labs()
        try:
            output = lab2.OutputPipeline(engine.tokenizer, generation.prompt_ids, generation.params,
                                         parse_tool_calls=req.parse_tool_calls, parse_reasoning=True,
                                         starts_in_reasoning=req.enable_thinking)
            formatter = lab7.MessagesEventFormatter(generation.request_id, model_name,
                                                    input_tokens=len(generation.prompt_ids),
                                                    send_thinking=body.thinking_enabled)
        except NotImplementedError as error:
            raise not_implemented(error) from None
        await admit(request, engine, generation)
        framing = EventFraming(formatter, not req.parallel_tool_calls)
        return await respond(request, generate(engine, generation, output, framing), req.stream,
                             event_frames(anthropic_error_body), lambda events: whole_body(events, lab7.build_message))

    return router
