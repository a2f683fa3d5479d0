"""Typed response bodies of the OpenAI and Anthropic endpoints, for the OpenAPI document only.

The server writes its replies itself (:mod:`mini_vllm.server`); these models tell ``/openapi.json``
what they look like, so a client generator or schemathesis knows. They allow extra fields
(``Loose``): a description, not a check. Requests are :mod:`mini_vllm.api.models`,
:mod:`~mini_vllm.api.responses_request` and :mod:`~mini_vllm.api.messages_request`.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict


class Loose(BaseModel):
    model_config = ConfigDict(extra="allow")


class ErrorDetail(Loose):
    message: str
    type: str
    param: str | None = None
    code: str | None = None


class ErrorResponse(Loose):
    error: ErrorDetail


class Usage(Loose):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class ResponseFunction(Loose):
    name: str
    arguments: str


class ResponseToolCall(Loose):
    id: str
    type: Literal["function"]
    function: ResponseFunction


class ResponseMessage(Loose):
    role: Literal["assistant"]
    content: str | None
    tool_calls: list[ResponseToolCall] | None = None
    reasoning: str | None = None


FinishReason = Literal["stop", "length", "tool_calls"]


class ChatChoice(Loose):
    index: int
    message: ResponseMessage
    logprobs: None = None
    finish_reason: FinishReason | None
    stop_reason: str | None = None


class ChatCompletionResponse(Loose):
    id: str
    object: Literal["chat.completion"]
    created: int
    model: str
    choices: list[ChatChoice]
    usage: Usage | None = None


class CompletionChoice(Loose):
    index: int
    text: str
    logprobs: None = None
    finish_reason: FinishReason | None
    stop_reason: str | None = None


class CompletionResponse(Loose):
    id: str
    object: Literal["text_completion"]
    created: int
    model: str
    choices: list[CompletionChoice]
    usage: Usage | None = None


class ModelCard(Loose):
    id: str
    object: Literal["model"]
    created: int
    owned_by: str
    max_model_len: int | None = None


class ModelList(Loose):
    object: Literal["list"]
    data: list[ModelCard]


class ResponseBody(Loose):
    """A whole Responses API response (``openai.types.responses.Response`` holds every field)."""

    id: str
    object: Literal["response"]
    created_at: int
    model: str
    status: Literal["completed", "incomplete", "failed"]
    output: list[dict[str, Any]]
    usage: dict[str, Any] | None = None


class MessageBody(Loose):
    """A whole Messages API response (``anthropic.types.Message``)."""

    id: str
    type: Literal["message"]
    role: Literal["assistant"]
    model: str
    content: list[dict[str, Any]]
    stop_reason: Literal["end_turn", "max_tokens", "stop_sequence", "tool_use"] | None
    stop_sequence: str | None = None
    usage: dict[str, Any]


class AnthropicErrorDetail(Loose):
    type: str
    message: str


class AnthropicErrorResponse(Loose):
    """Anthropic's error body: ``{"type": "error", "error": {"type", "message"}}``."""

    type: Literal["error"]
    error: AnthropicErrorDetail


def error_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """The ``responses=`` entry of a route: each error status with OpenAI's error body."""
    return {status: {"model": ErrorResponse} for status in statuses}


# With stream=true the body is server-sent events: `data: {chunk}` lines, then `data: [DONE]`. Each event's
# data is a chunk object or the string [DONE], so the document puts no schema on the events themselves.
SSE_DOC = {"text/event-stream": {"schema": {"description": "with stream=true: `data: {chunk}` events, then "
                                                          "`data: [DONE]`"}}}
