"""The request body of ``POST /v1/messages`` (Anthropic's Messages API), and the prompt it becomes.

Typed like the Chat Completions models (:mod:`mini_vllm.api.models`): unknown fields are a 400, values
are not coerced, and features a scripted model cannot honestly provide are refused by name. The
messages' blocks become the ChatML prompt of :mod:`mini_vllm.api.chatml`.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator

from mini_vllm.api import chatml
from mini_vllm.api.errors import ApiError
from mini_vllm.api.models import MAX_MESSAGES, MAX_STOP_CHARS, MAX_TOOLS, Strict, non_empty_messages
from mini_vllm.api.protocol import GenerationRequest, check_unicode, offered_tool, orphan_result
from mini_vllm.grammars.constraints import (
    Constraint,
    refuse_stop,
    tool_call_constraint,
)
from mini_vllm.labtypes.lab10 import Message, ToolCall


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

    non_empty = field_validator("messages")(non_empty_messages)

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
    parts = [chatml.turn("system", check_unicode(system, "system"))] if system else []
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
                said += chatml.call_text(block.name, arguments)
                calls.append(ToolCall(block.id, block.name, arguments))
            elif isinstance(block, ToolResultBlock):
                result = block.content if isinstance(block.content, str) else _text_of(block.content)
                parts.append(chatml.turn("tool", check_unicode(result, where)))
                chat.append(Message("tool", result, tool_call_id=block.tool_use_id))
        if said:
            parts.append(chatml.turn(message.role, said))
            chat.append(Message(message.role, text, None, tuple(calls)))
            user_message = said if message.role == "user" else user_message
    parse_calls = bool(body.tools) and (body.tool_choice is None or body.tool_choice.type != "none")
    one_call = body.tool_choice is not None and bool(body.tool_choice.disable_parallel_tool_use)
    stop = tuple(check_unicode(s, f"stop_sequences[{i}]") for i, s in enumerate(body.stop_sequences or ()))
    constraint = body.constraint()
    refuse_stop(constraint, stop, "stop_sequences")
    tools = tuple(offered_tool(t.name, t.description, t.input_schema) for t in body.tools or ())
    return GenerationRequest("chat", "".join(parts) + chatml.opening(body.thinking_enabled), user_message,
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
