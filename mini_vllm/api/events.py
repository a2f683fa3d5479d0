"""Request bodies of ``POST /v1/responses`` (OpenAI) and ``POST /v1/messages`` (Anthropic), and their chat template.

Typed like the Chat Completions models (``api_models``): unknown fields are a 400, values
are not coerced, sampling knobs a scripted model cannot use are checked and ignored, and
features it cannot honestly provide are refused by name.

Both requests become the same ChatML prompt the toy model reads (Qwen's template, as
``protocol.chat_prompt`` writes it for Chat Completions)::

    <|im_start|>system\\n{instructions / system}<|im_end|>
    <|im_start|>user\\n{text}<|im_end|>
    <|im_start|>assistant\\n{text}<tool_call>\\n{"name": ..., "arguments": {...}}\\n</tool_call><|im_end|>
    <|im_start|>tool\\n{the tool's output}<|im_end|>
    <|im_start|>assistant\\n                      (+ "<think>\\n" when thinking is on)

An earlier turn's call is written back as the ``<tool_call>`` text the model wrote, and a
tool's result as a ``tool`` turn, so the toy model (``toy_model.py``, ``toy_scripts.py``) sees that the last
input is a tool result and answers by quoting it. Earlier thoughts are dropped, as Qwen3's
template drops them.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, field_validator

from mini_vllm.api.errors import ApiError
from mini_vllm.api.models import MAX_MESSAGES, MAX_STOP_CHARS, MAX_TOOLS, Strict, refuse
from mini_vllm.api.protocol import GenerationRequest, check_unicode, offered_tool, orphan_result
from mini_vllm.grammars.constraints import (
    Constraint,
    json_object_constraint,
    refuse_stop,
    schema_constraint,
    strict_rules,
    tool_call_constraint,
)
from mini_vllm.labtypes.lab10 import Message, ToolCall

# ----------------------------------------------------------------- OpenAI Responses


class InputText(Strict):
    type: Literal["input_text", "output_text"]
    text: str
    annotations: list[Any] | None = None  # an output_text part sent back from an earlier response
    logprobs: list[Any] | None = None


class MessageItem(Strict):
    type: Literal["message"] = "message"
    role: Literal["user", "assistant", "system", "developer"]
    content: str | list[InputText]
    id: str | None = None
    status: str | None = None
    phase: str | None = None


class FunctionCallItem(Strict):
    type: Literal["function_call"]
    call_id: str
    name: str
    arguments: str  # JSON text, as the model wrote it
    id: str | None = None
    status: str | None = None


class FunctionCallOutputItem(Strict):
    type: Literal["function_call_output"]
    call_id: str
    output: str | list[InputText]
    id: str | None = None
    status: str | None = None


class ReasoningInputItem(Strict):
    """A thought from an earlier response, sent back by a client (the template drops it)."""

    type: Literal["reasoning"]
    id: str | None = None
    summary: list[Any] = Field(default_factory=list)
    content: list[Any] | None = None
    encrypted_content: str | None = None
    status: str | None = None


def _item_type(value: Any) -> str:
    return str(value.get("type", "message")) if isinstance(value, dict) else str(getattr(value, "type", "message"))


InputItem = Annotated[
    Annotated[MessageItem, Tag("message")] | Annotated[FunctionCallItem, Tag("function_call")]
    | Annotated[FunctionCallOutputItem, Tag("function_call_output")] | Annotated[ReasoningInputItem, Tag("reasoning")],
    Discriminator(_item_type)]


class ResponsesFunctionTool(Strict):
    type: Literal["function"]
    name: str = Field(pattern=r"^[A-Za-z0-9_-]{1,64}$")
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None


class TextConfig(Strict):
    """The Responses API's ``text``: the reply's format (text, or JSON held to a grammar: lab-08) and verbosity
    (checked, no effect)."""

    format: dict[str, Any] | None = None
    verbosity: Literal["low", "medium", "high"] | None = None

    @field_validator("format", mode="before")
    @classmethod
    def known_format(cls, value: Any) -> Any:
        if value is None:
            return value
        if not isinstance(value, dict) or not isinstance(value.get("type", "text"), str):
            raise ValueError("must be an object naming its type, such as {\"type\": \"text\"}")
        kind = value.get("type", "text")
        if kind not in ("text", "json_object", "json_schema"):
            raise refuse(f"text.format {kind!r}", "send text, json_object or json_schema")
        if kind == "json_schema" and not isinstance(value.get("schema"), dict):
            raise ValueError("text.format json_schema needs `schema`, a JSON Schema object")
        return value


class Reasoning(Strict):
    effort: Literal["none", "minimal", "low", "medium", "high", "xhigh"] | None = None
    summary: Literal["auto", "concise", "detailed"] | None = None


class ResponsesRequest(Strict):
    """POST /v1/responses."""

    model: str
    input: str | Annotated[list[InputItem], Field(max_length=MAX_MESSAGES)]
    instructions: str | None = None
    tools: Annotated[list[ResponsesFunctionTool], Field(max_length=MAX_TOOLS)] | None = None
    tool_choice: Literal["none", "auto"] | None = None
    parallel_tool_calls: bool | None = None
    max_output_tokens: int | None = Field(None, ge=1)
    stream: bool | None = False
    reasoning: Reasoning | None = None  # an effort other than "none" opens the thought
    # Checked, no effect.
    temperature: float | None = Field(None, ge=0, le=2)
    top_p: float | None = Field(None, ge=0, le=1)
    include: list[str] | None = None
    metadata: dict[str, str] | None = None
    store: bool | None = None
    truncation: Literal["auto", "disabled"] | None = None
    user: str | None = None
    text: TextConfig | None = None
    prompt_cache_key: str | None = None
    # Refused whenever present: nothing is stored between requests.
    previous_response_id: str | None = None
    conversation: Any = None

    @field_validator("input")
    @classmethod
    def non_empty(cls, value: str | list[Any]) -> str | list[Any]:
        if not value:
            raise ValueError("input must be a non-empty string or list of items")
        return value

    @field_validator("previous_response_id", "conversation", mode="before")
    @classmethod
    def stateless(cls, value: Any) -> Any:
        if value is not None:
            raise refuse("a stored conversation", "nothing is stored between requests; send the whole input")
        return value

    def constraint(self) -> Constraint | None:
        """``text.format``'s grammar (lab-08), or None for plain text."""
        fmt = (self.text.format if self.text else None) or {}
        if fmt.get("type") == "json_object":
            return json_object_constraint("text.format json_object")
        if fmt.get("type") == "json_schema":
            if fmt.get("strict") is True:
                strict_rules(fmt["schema"], "text.format.schema", f"text.format '{fmt.get('name', '')}'")
            return schema_constraint(fmt["schema"], "text.format.schema", "text.format json_schema")
        return None


def _text(content: str | list[InputText]) -> str:
    return content if isinstance(content, str) else "".join(part.text for part in content)


def _turn(role: str, text: str) -> str:
    return f"<|im_start|>{role}\n{text}<|im_end|>\n"


def _call_text(name: str, arguments: str) -> str:
    """A call written back as the model writes it: the envelope around the arguments' own text."""
    return "<tool_call>\n" + json.dumps({"name": name}, ensure_ascii=False)[:-1] + f', "arguments": {arguments}}}' \
        + "\n</tool_call>"


def _opening(thinking: bool) -> str:
    return "<|im_start|>assistant\n" + ("<think>\n" if thinking else "")


def _with_call(chat: list[Message], call: ToolCall) -> None:
    """A call joins the assistant turn just before it (an assistant's calls are one message), else opens one."""
    if chat and chat[-1].role == "assistant" and not chat[-1].reasoning:
        last = chat[-1]
        chat[-1] = Message("assistant", last.content, None, (*last.tool_calls, call))
    else:
        chat.append(Message("assistant", "", None, (call,)))


def from_responses(body: ResponsesRequest) -> GenerationRequest:
    thinking = body.reasoning is not None and body.reasoning.effort not in (None, "none")
    parts = [_turn("system", check_unicode(body.instructions, "instructions"))] if body.instructions else []
    chat = [Message("system", body.instructions)] if body.instructions else []
    user_message = ""
    items = [MessageItem(role="user", content=body.input)] if isinstance(body.input, str) else body.input
    calls_made: set[str] = set()
    for i, item in enumerate(items):
        if isinstance(item, MessageItem):
            text = check_unicode(_text(item.content), f"input[{i}].content")
            role = "system" if item.role == "developer" else item.role
            parts.append(_turn(role, text))
            chat.append(Message(role, text))
            user_message = text if item.role == "user" else user_message
        elif isinstance(item, FunctionCallItem):
            calls_made.add(item.call_id)
            parts.append(_turn("assistant", check_unicode(_call_text(item.name, item.arguments), f"input[{i}]")))
            _with_call(chat, ToolCall(item.call_id, item.name, item.arguments))
        elif isinstance(item, FunctionCallOutputItem):
            if item.call_id not in calls_made:
                raise orphan_result(f"input[{i}].call_id", item.call_id,
                                    "a function_call_output must answer a function_call item earlier in the input")
            output = check_unicode(_text(item.output), f"input[{i}].output")
            parts.append(_turn("tool", output))
            chat.append(Message("tool", output, tool_call_id=item.call_id))
    parse_calls = bool(body.tools) and body.tool_choice != "none"
    tools = tuple(offered_tool(t.name, t.description, t.parameters) for t in body.tools or ())
    return GenerationRequest("chat", "".join(parts) + _opening(thinking), user_message, bool(body.stream), False,
                             max_tokens=body.max_output_tokens, enable_thinking=thinking,
                             parse_tool_calls=parse_calls, parallel_tool_calls=body.parallel_tool_calls is not False,
                             constraint=body.constraint(), prompt_field="input", max_tokens_field="max_output_tokens",
                             chat=tuple(chat), tools=tools)


# ----------------------------------------------------------------- Anthropic Messages


class TextBlock(Strict):
    type: Literal["text"]
    text: str
    cache_control: dict[str, Any] | None = None
    citations: list[Any] | None = None


class ToolUseBlock(Strict):
    type: Literal["tool_use"]
    id: str
    name: str
    input: dict[str, Any]
    cache_control: dict[str, Any] | None = None


class ToolResultBlock(Strict):
    type: Literal["tool_result"]
    tool_use_id: str
    content: str | list[TextBlock] = ""
    is_error: bool | None = None
    cache_control: dict[str, Any] | None = None


class ThinkingBlock(Strict):
    """An earlier turn's thought, sent back by a client (the template drops it)."""

    type: Literal["thinking"]
    thinking: str
    signature: str


ContentBlock = Annotated[TextBlock | ToolUseBlock | ToolResultBlock | ThinkingBlock, Field(discriminator="type")]


class AnthropicMessage(Strict):
    role: Literal["user", "assistant"]
    content: str | list[ContentBlock]


class AnthropicTool(Strict):
    name: str = Field(pattern=r"^[A-Za-z0-9_-]{1,64}$")
    description: str | None = None
    input_schema: dict[str, Any]
    type: Literal["custom"] | None = None
    cache_control: dict[str, Any] | None = None


class AnthropicToolChoice(Strict):
    type: Literal["auto", "none", "any", "tool"]
    name: str | None = None
    disable_parallel_tool_use: bool | None = None



class Thinking(Strict):
    type: Literal["enabled", "disabled", "adaptive"]
    budget_tokens: int | None = Field(None, ge=1)


MAX_STOP_SEQUENCES = 16  # Anthropic documents no cap; this server's own bound on per-token stop checks


class MessagesRequest(Strict):
    """POST /v1/messages."""

    model: str
    max_tokens: int = Field(ge=1)  # required, as Anthropic requires it
    messages: Annotated[list[AnthropicMessage], Field(max_length=MAX_MESSAGES)]
    system: str | list[TextBlock] | None = None
    stop_sequences: Annotated[list[Annotated[str, Field(max_length=MAX_STOP_CHARS)]],
                              Field(max_length=MAX_STOP_SEQUENCES)] | None = None
    stream: bool | None = False
    tools: Annotated[list[AnthropicTool], Field(max_length=MAX_TOOLS)] | None = None
    tool_choice: AnthropicToolChoice | None = None
    thinking: Thinking | None = None  # "enabled": the template opens the thought, and it is sent as thinking blocks
    # Checked, no effect.
    temperature: float | None = Field(None, ge=0, le=1)
    top_p: float | None = Field(None, ge=0, le=1)
    top_k: int | None = Field(None, ge=0)
    metadata: dict[str, Any] | None = None
    service_tier: Literal["auto", "standard_only"] | None = None

    @field_validator("messages")
    @classmethod
    def non_empty(cls, value: list[Any]) -> list[Any]:
        if not value:
            raise ValueError("messages must be a non-empty list")
        return value

    @field_validator("stop_sequences")
    @classmethod
    def no_empty_stop(cls, value: list[str] | None) -> list[str] | None:
        if value and "" in value:
            raise ValueError("stop sequences must not be empty (an empty one would match at once)")
        return value

    @property
    def thinking_enabled(self) -> bool:
        return self.thinking is not None and self.thinking.type != "disabled"

    def constraint(self) -> Constraint | None:
        """``tool_choice`` any / tool: the reply is a call to one of the tools (lab-08's grammar), else None."""
        choice, tools = self.tool_choice, self.tools or []
        if choice is None or choice.type not in ("any", "tool"):
            return None
        if not tools:
            raise ApiError(400, f"tool_choice {choice.type!r} needs `tools`", param="tool_choice")
        if choice.type == "tool":
            named = [(i, t) for i, t in enumerate(tools) if t.name == choice.name]
            if not named:
                raise ApiError(400, f"tool_choice names no tool in `tools`: {choice.name!r}", param="tool_choice.name")
            return tool_call_constraint([(named[0][1].name, named[0][1].input_schema)],
                                        f"tools[{named[0][0]}].input_schema")
        return tool_call_constraint([(t.name, t.input_schema) for t in tools], "tools")


def from_messages(body: MessagesRequest) -> GenerationRequest:
    system = body.system if isinstance(body.system, str) or body.system is None else _text_of(body.system)
    parts = [_turn("system", check_unicode(system, "system"))] if system else []
    chat = [Message("system", system)] if system else []
    user_message = ""
    calls_before: set[str] = set()  # the tool_use ids of the message before this one (a result answers one of them)
    for i, message in enumerate(body.messages):
        blocks = [TextBlock(type="text", text=message.content)] if isinstance(message.content, str) else message.content
        check_results(blocks, calls_before, i)
        calls_before = {block.id for block in blocks if isinstance(block, ToolUseBlock)}
        said, text, calls = "", "", []
        for j, block in enumerate(blocks):
            where = f"messages[{i}].content[{j}]"
            if isinstance(block, TextBlock):
                said += check_unicode(block.text, where)
                text += block.text
            elif isinstance(block, ToolUseBlock):
                arguments = json.dumps(block.input, ensure_ascii=False)
                said += _call_text(block.name, arguments)
                calls.append(ToolCall(block.id, block.name, arguments))
            elif isinstance(block, ToolResultBlock):
                result = block.content if isinstance(block.content, str) else _text_of(block.content)
                parts.append(_turn("tool", check_unicode(result, where)))
                chat.append(Message("tool", result, tool_call_id=block.tool_use_id))
        if said:
            parts.append(_turn(message.role, said))
            chat.append(Message(message.role, text, None, tuple(calls)))
            user_message = said if message.role == "user" else user_message
    parse_calls = bool(body.tools) and (body.tool_choice is None or body.tool_choice.type != "none")
    one_call = body.tool_choice is not None and bool(body.tool_choice.disable_parallel_tool_use)
    stop = tuple(check_unicode(s, f"stop_sequences[{i}]") for i, s in enumerate(body.stop_sequences or ()))
    constraint = body.constraint()
    refuse_stop(constraint, stop, "stop_sequences")
    tools = tuple(offered_tool(t.name, t.description, t.input_schema) for t in body.tools or ())
    return GenerationRequest("chat", "".join(parts) + _opening(body.thinking_enabled), user_message,
                             bool(body.stream), False, stop, body.max_tokens, enable_thinking=body.thinking_enabled,
                             parse_tool_calls=parse_calls, parallel_tool_calls=not one_call, constraint=constraint,
                             chat=tuple(chat), tools=tools)


def check_results(blocks: list[Any], calls_before: set[str], i: int) -> None:
    """Anthropic's rule: each tool_result block answers a tool_use block of the message just before it."""
    for j, block in enumerate(blocks):
        if isinstance(block, ToolResultBlock) and block.tool_use_id not in calls_before:
            raise orphan_result(f"messages[{i}].content[{j}].tool_use_id", block.tool_use_id,
                                "each tool_result block must answer a tool_use block in the previous message")


def _text_of(blocks: list[TextBlock]) -> str:
    return "".join(block.text for block in blocks)


# ----------------------------------------------------------------- what the document says comes back


class Loose(BaseModel):
    model_config = ConfigDict(extra="allow")


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
