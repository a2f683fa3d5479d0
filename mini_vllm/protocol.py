"""The OpenAI request format: parse and check a request body, or say exactly what is wrong.

Every refusal is an :class:`ApiError`, which the server turns into OpenAI's error body:
``{"error": {"message", "type", "param", "code"}}`` with a 4xx status.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from mini_vllm.sampling import InvalidRequest, SamplingParams

ROLES = ("system", "user", "assistant", "tool")


class ApiError(Exception):
    def __init__(self, status: int, message: str, param: str | None = None, code: str | None = None,
                 type: str = "invalid_request_error") -> None:
        super().__init__(message)
        self.status, self.message, self.param, self.code, self.type = status, message, param, code, type

    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}


@dataclass(frozen=True)
class GenerationRequest:
    """A checked request: the prompt text, what the toy model keys on, and how to sample."""

    kind: str  # "chat" or "completion"
    prompt: str
    user_message: str
    params: SamplingParams
    stream: bool
    include_usage: bool
    include_reasoning: bool = True  # false: the reply's thoughts are parsed out but never sent
    enable_thinking: bool = False  # chat_template_kwargs.enable_thinking: the template opens the thought


def parse_body(raw: bytes) -> dict[str, Any]:
    try:
        body = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ApiError(400, f"the request body is not valid JSON: {error}", code="invalid_json") from error
    if not isinstance(body, dict):
        raise ApiError(400, "the request body must be a JSON object")
    return body


def parse_request(body: dict[str, Any], kind: str, served_model: str) -> GenerationRequest:
    model = body.get("model")
    if not isinstance(model, str):
        raise ApiError(400, "model is required (a string)", param="model")
    if model != served_model:
        raise ApiError(404, f"The model `{model}` does not exist. This server serves `{served_model}`.",
                       param="model", code="model_not_found", type="NotFoundError")
    enable_thinking = _enable_thinking(body) if kind == "chat" else False
    if kind == "chat":
        prompt, user_message = _chat_prompt(body.get("messages"), enable_thinking)
    else:
        raw_prompt = body.get("prompt")
        if not isinstance(raw_prompt, str) or not raw_prompt:
            raise ApiError(400, "prompt is required (a non-empty string)", param="prompt")
        prompt = user_message = raw_prompt
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise ApiError(400, "stream must be true or false", param="stream")
    options = body.get("stream_options") or {}
    if not isinstance(options, dict):
        raise ApiError(400, "stream_options must be an object", param="stream_options")
    include_reasoning = body.get("include_reasoning", True)
    if not isinstance(include_reasoning, bool):
        raise ApiError(400, "include_reasoning must be true or false", param="include_reasoning")
    return GenerationRequest(kind, prompt, user_message, _sampling_params(body), stream,
                             bool(options.get("include_usage", False)), include_reasoning, enable_thinking)


def _enable_thinking(body: dict[str, Any]) -> bool:
    """``chat_template_kwargs.enable_thinking`` (the Qwen3 / vLLM convention), default false."""
    kwargs = body.get("chat_template_kwargs") or {}
    if not isinstance(kwargs, dict):
        raise ApiError(400, "chat_template_kwargs must be an object", param="chat_template_kwargs")
    enabled = kwargs.get("enable_thinking", False)
    if not isinstance(enabled, bool):
        raise ApiError(400, "enable_thinking must be true or false", param="chat_template_kwargs.enable_thinking")
    return enabled


def _chat_prompt(messages: Any, enable_thinking: bool = False) -> tuple[str, str]:
    """ChatML, the template Qwen uses: each message framed by <|im_start|>role ... <|im_end|>.

    With ``enable_thinking`` the template also opens the assistant's thought (``<think>\n``),
    as Qwen3's thinking templates do: the reply then starts inside reasoning.
    """
    if not isinstance(messages, list) or not messages:
        raise ApiError(400, "messages must be a non-empty list", param="messages")
    parts, user_message = [], ""
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or message.get("role") not in ROLES:
            raise ApiError(400, f"messages[{i}] needs a role, one of {', '.join(ROLES)}", param=f"messages[{i}].role")
        content = message.get("content") or ""
        if isinstance(content, list):  # the "parts" form: [{"type": "text", "text": ...}]
            content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
        if not isinstance(content, str):
            raise ApiError(400, f"messages[{i}].content must be a string", param=f"messages[{i}].content")
        parts.append(f"<|im_start|>{message['role']}\n{content}<|im_end|>\n")
        if message["role"] == "user":
            user_message = content
    opening = "<|im_start|>assistant\n" + ("<think>\n" if enable_thinking else "")
    return "".join(parts) + opening, user_message


def _sampling_params(body: dict[str, Any]) -> SamplingParams:
    stop = body.get("stop") or ()
    if isinstance(stop, str):
        stop = (stop,)
    elif isinstance(stop, list):
        stop = tuple(stop)
    try:
        return SamplingParams(
            max_tokens=body.get("max_completion_tokens", body.get("max_tokens", 256)),
            stop=stop,
            include_stop_str_in_output=body.get("include_stop_str_in_output", False),
            skip_special_tokens=body.get("skip_special_tokens", True),
            n=body.get("n", 1),
        )
    except InvalidRequest as error:
        raise ApiError(400, str(error), param=error.param) from error
