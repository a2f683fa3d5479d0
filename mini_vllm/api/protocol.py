"""From a checked request body to what the engine and the pipeline need.

pydantic (``api_models``) has already checked every field's type and range; what is left here
needs the server's own knowledge: which model it serves, the chat template, how long the
context is, and text that is valid JSON but not valid Unicode (a lone surrogate such as
``"\\ud800"`` parses, and would only fail later, when the tokenizer encodes it).
Every refusal is an :class:`ApiError` (see ``api_errors``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from mini_vllm.api.errors import ApiError
from mini_vllm.api.models import AssistantMessage, ChatCompletionRequest, CompletionRequest, ToolMessage, message_text
from mini_vllm.grammars.constraints import Constraint, refuse_stop
from mini_vllm.labtypes.lab10 import Message, Tool, ToolCall
from mini_vllm.sampling import InvalidRequest, SamplingParams

__all__ = ["ApiError", "GenerationRequest", "check_model", "context_exceeded", "from_chat", "from_completion"]


@dataclass(frozen=True)
class GenerationRequest:
    """A checked request: the prompt text, what the toy model keys on, and what to do with the reply."""

    kind: str  # "chat" or "completion"
    prompt: str
    user_message: str
    stream: bool
    include_usage: bool
    stop: tuple[str, ...] = ()
    max_tokens: int | None = None  # None: what is left of the context
    include_stop_str_in_output: bool = False
    skip_special_tokens: bool = True
    include_reasoning: bool = True  # false: the reply's thoughts are parsed out but never sent
    enable_thinking: bool = False  # chat_template_kwargs.enable_thinking: the template opens the thought
    parse_tool_calls: bool = False  # tools were offered and tool_choice is not "none"
    parallel_tool_calls: bool = True  # false: at most one call is sent
    constraint: Constraint | None = None  # a grammar the reply must match (lab-08): response_format, a forced call
    prompt_field: str = "messages"  # the request fields an error about the prompt's or the reply's length names
    max_tokens_field: str = "max_tokens"
    # The chat as lab-10 renders it to token ids (``prompt`` is then only the fallback while lab-10 is a stub);
    # None for /v1/completions, whose raw prompt is encoded as it is (its client owns its control tokens).
    chat: tuple[Message, ...] | None = None
    tools: tuple[Tool, ...] = ()

    def sampling_params(self, prompt_tokens: int, max_model_len: int) -> SamplingParams:
        """The engine's parameters once the prompt's length is known (vLLM's rule for the default)."""
        room = max_model_len - prompt_tokens
        if room < 1:
            raise context_exceeded(prompt_tokens, max_model_len, param=self.prompt_field)
        if self.max_tokens is not None and self.max_tokens > room:
            raise context_exceeded(prompt_tokens, max_model_len, self.max_tokens, param=self.max_tokens_field)
        try:
            return SamplingParams(max_tokens=self.max_tokens or room, stop=self.stop,
                                  include_stop_str_in_output=self.include_stop_str_in_output,
                                  skip_special_tokens=self.skip_special_tokens)
        except InvalidRequest as error:  # the models check the same rules first; kept as the engine's own guard
            raise ApiError(400, str(error), param=error.param, code="invalid_value") from error


def context_exceeded(prompt_tokens: int, max_model_len: int, max_tokens: int | None = None,
                     at_least: bool = False, param: str | None = None) -> ApiError:
    """A request that can never fit: a 400 (retrying cannot help), with OpenAI's code. ``param``: the field
    to name (default: Chat Completions' ``messages``, or ``max_tokens`` when the reply is what does not fit)."""
    if max_tokens is None:
        size = f"at least {prompt_tokens}" if at_least else f"{prompt_tokens}"
        message = (f"This model's maximum context length is {max_model_len} tokens, and the prompt alone is "
                   f"{size} tokens (at least one more is needed for the reply). Shorten the prompt.")
        param = param or "messages"
    else:
        param = param or "max_tokens"
        message = (f"This model's maximum context length is {max_model_len} tokens. However, you requested "
                   f"{prompt_tokens + max_tokens} tokens ({prompt_tokens} in the prompt, {max_tokens} for the "
                   f"completion). Reduce the prompt or {param}.")
    return ApiError(400, message, param=param, code="context_length_exceeded")


def check_model(requested: str, served: str) -> None:
    if requested != served:
        raise ApiError(404, f"The model `{requested}` does not exist. This server serves `{served}`.",
                       param="model", code="model_not_found", type="NotFoundError")


def check_unicode(text: str, param: str) -> str:
    """Refuse a lone surrogate: JSON lets ``\\ud800`` through, but it is no character and has no UTF-8."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        bad = ord(text[error.start])
        raise ApiError(400, f"{param} holds a lone surrogate (U+{bad:04X}) at position {error.start}: "
                       "that is not a Unicode character, so it cannot be encoded as UTF-8",
                       param=param, code="invalid_unicode") from error
    return text


def _stop(body: ChatCompletionRequest | CompletionRequest) -> tuple[str, ...]:
    stop = body.stop_strings()
    for i, text in enumerate(stop):
        check_unicode(text, "stop" if isinstance(body.stop, str) else f"stop[{i}]")
    return stop


def from_chat(body: ChatCompletionRequest) -> GenerationRequest:
    kwargs = body.chat_template_kwargs
    enable_thinking = bool(kwargs and kwargs.enable_thinking)
    prompt, user_message = chat_prompt(body, enable_thinking)
    options = body.stream_options
    constraint, stop = body.constraint(), _stop(body)
    refuse_stop(constraint, stop)
    return GenerationRequest(
        "chat", prompt, user_message, bool(body.stream), bool(options and options.include_usage), stop,
        body.completion_limit(), body.include_stop_str_in_output, body.skip_special_tokens, body.include_reasoning,
        enable_thinking, body.parses_tool_calls(), body.parallel_tool_calls is not False, constraint,
        max_tokens_field="max_completion_tokens" if body.max_completion_tokens is not None else "max_tokens",
        chat=chat_messages(body), tools=tuple(offered_tool(t.function.name, t.function.description,
                                                           t.function.parameters) for t in body.tools or ()))


def chat_messages(body: ChatCompletionRequest) -> tuple[Message, ...]:
    """The messages as lab-10 reads them: every field a client wrote stays text (checked by ``chat_prompt``)."""
    chat: list[Message] = []
    for message in body.messages:
        text = message_text(message.content)
        if isinstance(message, AssistantMessage):
            calls = tuple(ToolCall(c.id, c.function.name, c.function.arguments) for c in message.tool_calls or ())
            chat.append(Message("assistant", text, message.reasoning or message.reasoning_content, calls))
        elif isinstance(message, ToolMessage):
            chat.append(Message("tool", text, tool_call_id=message.tool_call_id))
        else:
            chat.append(Message("user" if message.role == "user" else "system", text))
    return tuple(chat)


def offered_tool(name: str, description: str | None, parameters: dict[str, Any] | None) -> Tool:
    return Tool(name, description or "", parameters if parameters is not None else {"type": "object", "properties": {}})


def from_completion(body: CompletionRequest) -> GenerationRequest:
    prompt = check_unicode(body.prompt, "prompt")
    options = body.stream_options
    return GenerationRequest("completion", prompt, prompt, bool(body.stream), bool(options and options.include_usage),
                             _stop(body), body.completion_limit(), body.include_stop_str_in_output,
                             body.skip_special_tokens, prompt_field="prompt")


def orphan_result(param: str, call_id: str, rule: str) -> ApiError:
    """A tool's result that answers no call the conversation made: a 400, as the real APIs answer it."""
    return ApiError(400, f"{param}: no tool call with id {call_id!r} came before this result ({rule})",
                    param=param, code="invalid_value")


def chat_prompt(body: ChatCompletionRequest, enable_thinking: bool = False) -> tuple[str, str]:
    """ChatML, the template Qwen uses: each message framed by <|im_start|>role ... <|im_end|>.

    An assistant turn's tool calls are written back as the ``<tool_call>`` text the model wrote.
    With ``enable_thinking`` the template also opens the assistant's thought (``<think>\\n``),
    as Qwen3's thinking templates do: the reply then starts inside reasoning.
    Returns the prompt and the last user message (what the toy model keys its reply on).
    """
    parts, user_message = [], ""
    calls_made: set[str] = set()  # the ids of the calls the assistant made so far: a tool message answers one
    for i, message in enumerate(body.messages):
        content = check_unicode(message_text(message.content), f"messages[{i}].content")
        if isinstance(message, AssistantMessage):
            calls_made.update(call.id for call in message.tool_calls or ())
        elif isinstance(message, ToolMessage) and message.tool_call_id not in calls_made:
            raise orphan_result(f"messages[{i}].tool_call_id", message.tool_call_id,
                                "a message with role 'tool' must answer a tool call of an earlier assistant message")
        if isinstance(message, AssistantMessage):
            for call in message.tool_calls or ():
                check_unicode(call.function.arguments, f"messages[{i}].tool_calls")
                content += ("<tool_call>\n" + json.dumps({"name": call.function.name}, ensure_ascii=False)[:-1]
                            + f', "arguments": {call.function.arguments}}}\n</tool_call>')
        parts.append(f"<|im_start|>{message.role}\n{content}<|im_end|>\n")
        if message.role == "user":
            user_message = content
    opening = "<|im_start|>assistant\n" + ("<think>\n" if enable_thinking else "")
    return "".join(parts) + opening, user_message
