"""The request body of ``POST /v1/responses`` (OpenAI's Responses API), and the prompt it becomes.

Typed like the Chat Completions models (:mod:`mini_vllm.api.models`): unknown fields are a 400, values
are not coerced, sampling knobs a scripted model cannot use are checked and ignored, and
features it cannot honestly provide are refused by name. The input items become the ChatML
prompt of :mod:`mini_vllm.api.chatml`.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Discriminator, Field, Tag, field_validator

from mini_vllm.api import chatml
from mini_vllm.api.models import MAX_MESSAGES, MAX_TOOLS, Strict, refuse
from mini_vllm.api.protocol import GenerationRequest, check_unicode, offered_tool, orphan_result
from mini_vllm.grammars.constraints import (
    Constraint,
    json_object_constraint,
    schema_constraint,
    strict_rules,
)
from mini_vllm.labtypes.lab10 import Message, ToolCall


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


def from_responses(body: ResponsesRequest) -> GenerationRequest:
    thinking = body.reasoning is not None and body.reasoning.effort not in (None, "none")
    parts = [chatml.turn("system", check_unicode(body.instructions, "instructions"))] if body.instructions else []
    chat = [Message("system", body.instructions)] if body.instructions else []
    user_message = ""
    items = [MessageItem(role="user", content=body.input)] if isinstance(body.input, str) else body.input
    calls_made: set[str] = set()
    for i, item in enumerate(items):
        if isinstance(item, MessageItem):
            text = check_unicode(_text(item.content), f"input[{i}].content")
            role = "system" if item.role == "developer" else item.role
            parts.append(chatml.turn(role, text))
            chat.append(Message(role, text))
            user_message = text if item.role == "user" else user_message
        elif isinstance(item, FunctionCallItem):
            calls_made.add(item.call_id)
            written = chatml.call_text(item.name, item.arguments)
            parts.append(chatml.turn("assistant", check_unicode(written, f"input[{i}]")))
            chatml.with_call(chat, ToolCall(item.call_id, item.name, item.arguments))
        elif isinstance(item, FunctionCallOutputItem):
            if item.call_id not in calls_made:
                raise orphan_result(f"input[{i}].call_id", item.call_id,
                                    "a function_call_output must answer a function_call item earlier in the input")
            output = check_unicode(_text(item.output), f"input[{i}].output")
            parts.append(chatml.turn("tool", output))
            chat.append(Message("tool", output, tool_call_id=item.call_id))
    parse_calls = bool(body.tools) and body.tool_choice != "none"
    tools = tuple(offered_tool(t.name, t.description, t.parameters) for t in body.tools or ())
    return GenerationRequest("chat", "".join(parts) + chatml.opening(thinking), user_message, bool(body.stream), False,
                             max_tokens=body.max_output_tokens, enable_thinking=thinking,
                             parse_tool_calls=parse_calls, parallel_tool_calls=body.parallel_tool_calls is not False,
                             constraint=body.constraint(), prompt_field="input", max_tokens_field="max_output_tokens",
                             chat=tuple(chat), tools=tools)
