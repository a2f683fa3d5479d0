"""Typed request bodies of the OpenAI endpoints (pydantic, as FastAPI and vLLM use them).

Every field OpenAI documents for Chat Completions and Completions is declared here, with its
type and range, in one of three kinds:

- **honoured**: the pipeline acts on it (``stop``, ``max_tokens``, ``stream_options``, ``tools``,
  ``tool_choice: none/auto``, ``parallel_tool_calls`` ...);
- **checked, no effect**: a sampling knob a scripted model has no use for (``temperature``,
  ``top_p``, ``seed``, penalties, ``logit_bias`` ...). A wrong value is still a 400: a client
  with a bug must hear about it here, not on the day it talks to a real model;
- **refused**: a feature the toy model cannot honestly provide (``logprobs``,
  audio ...): a 400 naming it, never a reply that pretends. ``response_format`` (``json_schema``,
  ``json_object``) and ``tool_choice: required`` / a named function are honoured by constrained
  decoding (lab-08, and lab-09 where a stack is needed: ``mini_vllm.grammars.constraints``); a schema keyword outside
  the supported subset is a 400.

Unknown fields are a 400 too (``extra="forbid"``), as OpenAI answers them, and ``strict=True``
keeps pydantic from reading ``"5"`` as 5 or ``"no"`` as false. The models are the OpenAPI
document's request bodies (``/openapi.json``), so a tool such as schemathesis can test the API; the
response bodies are in :mod:`mini_vllm.api.response_bodies`.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, WithJsonSchema, field_validator

from mini_vllm.grammars.constraints import (
    Constraint,
    json_object_constraint,
    schema_constraint,
    strict_rules,
    tool_call_constraint,
)

NOT_SCRIPTABLE = "the toy model's replies are scripted"

# What one request may ask for, so that no request can cost the server without bound (issue 26):
MAX_STOPS = 4  # stop strings per request: OpenAI's limit ("up to 4 sequences")
MAX_STOP_CHARS = 1000  # characters per stop string (this server's cap: every token is checked against each)
MAX_MESSAGES = 10_000  # messages (or Responses input items) per request: validating them stays a few ms
MAX_TOOLS = 128  # tools per request: OpenAI's limit
MAX_LOGIT_BIAS = 1024  # logit_bias entries per request (this server's cap: each is a token id checked by pydantic)


def documented(schema: dict[str, Any]) -> WithJsonSchema:
    """What the OpenAPI document says a field accepts, where a validator below enforces it with a better
    message than pydantic's (``only n=1``, ``logprobs ... not supported``). The document tells the truth,
    so a generator such as schemathesis sends a valid value where it means to."""
    return WithJsonSchema(schema)


NULL = {"type": "null"}


def nullable(schema: dict[str, Any], default: Any = None) -> WithJsonSchema:
    return documented({"anyOf": [schema, NULL], "default": default})


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


def non_empty_messages(value: list[Any]) -> list[Any]:
    """A ``messages`` validator for every provider's request: a conversation holds at least one message."""
    if not value:
        raise ValueError("messages must be a non-empty list")
    return value


def refuse(name: str, why: str) -> ValueError:
    return ValueError(f"{name} is not supported by this server: {why}")


# ----------------------------------------------------------------- messages


class TextPart(Strict):
    type: Literal["text"]
    text: str


class RefusalPart(Strict):
    type: Literal["refusal"]
    refusal: str


TextContent = str | list[TextPart]


class SystemMessage(Strict):
    role: Literal["system"]
    content: TextContent
    name: str | None = None


class DeveloperMessage(Strict):
    role: Literal["developer"]
    content: TextContent
    name: str | None = None


class UserMessage(Strict):
    """Text only: image, audio and file parts are refused (the toy model reads no pixels)."""

    role: Literal["user"]
    content: TextContent
    name: str | None = None


class FunctionCall(Strict):
    name: str
    arguments: str  # JSON text, as the model wrote it


class AssistantToolCall(Strict):
    id: str
    type: Literal["function"]
    function: FunctionCall


class AssistantMessage(Strict):
    role: Literal["assistant"]
    content: str | list[TextPart | RefusalPart] | None = None
    name: str | None = None
    refusal: str | None = None
    tool_calls: list[AssistantToolCall] | None = None
    reasoning: str | None = None  # vLLM accepts the thought of an earlier turn back
    reasoning_content: str | None = None


class ToolMessage(Strict):
    role: Literal["tool"]
    content: TextContent
    tool_call_id: str


ChatMessage = Annotated[SystemMessage | DeveloperMessage | UserMessage | AssistantMessage | ToolMessage,
                        Field(discriminator="role")]


def message_text(content: str | list[Any] | None) -> str:
    """The text of a message's content, in the string or the parts form."""
    if content is None or isinstance(content, str):
        return content or ""
    return "".join(str(getattr(part, "text", None) or getattr(part, "refusal", "")) for part in content)


# ----------------------------------------------------------------- tools


class FunctionDefinition(Strict):
    name: str = Field(pattern=r"^[A-Za-z0-9_-]{1,64}$")
    description: str | None = None
    parameters: dict[str, Any] | None = None  # a JSON Schema object
    strict: bool | None = None


class ToolDefinition(Strict):
    type: Literal["function"]
    function: FunctionDefinition


class NamedFunction(Strict):
    name: str


class NamedToolChoice(Strict):
    type: Literal["function"]
    function: NamedFunction


class ResponseFormat(Strict):
    type: Literal["text", "json_object", "json_schema"]
    json_schema: dict[str, Any] | None = None


class StreamOptions(Strict):
    include_usage: bool | None = None
    include_obfuscation: Annotated[bool | None, nullable({"const": False})] = None

    @field_validator("include_obfuscation")
    @classmethod
    def no_obfuscation(cls, value: bool | None) -> bool | None:
        if value:
            raise refuse("stream_options.include_obfuscation", "chunks carry no obfuscation padding; send false")
        return value


class ChatTemplateKwargs(Strict):
    enable_thinking: bool = False  # Qwen3 / vLLM: the template opens the thought (<think>\n)


# ----------------------------------------------------------------- what both endpoints share

Probability = Annotated[float, Field(ge=0, le=1)]
Penalty = Annotated[float, Field(ge=-2, le=2)]


class SamplingFields(Strict):
    """The fields Chat Completions and Completions have in common."""

    model: str
    max_tokens: int | None = Field(None, ge=1, description="default: what is left of the context (vLLM's rule)")
    n: Annotated[int | None, nullable({"type": "integer", "const": 1}, 1)] = Field(1, description="only 1")
    stop: Annotated[str | list[str] | None, nullable({"anyOf": [
        {"type": "string", "minLength": 1, "maxLength": MAX_STOP_CHARS},
        {"type": "array", "maxItems": MAX_STOPS,
         "items": {"type": "string", "minLength": 1, "maxLength": MAX_STOP_CHARS}}]})] = None
    stream: bool | None = False
    stream_options: StreamOptions | None = None
    # Checked, no effect: a scripted model does not sample.
    temperature: float | None = Field(None, ge=0, le=2)
    top_p: Probability | None = None
    frequency_penalty: Penalty | None = None
    presence_penalty: Penalty | None = None
    seed: int | None = None
    logit_bias: Annotated[dict[str, Annotated[float, Field(ge=-100, le=100)]] | None,
                          Field(max_length=MAX_LOGIT_BIAS), nullable({
        "type": "object", "propertyNames": {"pattern": "^[0-9]+$"}, "maxProperties": MAX_LOGIT_BIAS,
        "additionalProperties": {"type": "number", "minimum": -100, "maximum": 100}})] = None
    user: str | None = None
    # vLLM's extensions that the pipeline honours.
    include_stop_str_in_output: bool = False
    skip_special_tokens: bool = True

    @field_validator("n")
    @classmethod
    def only_one_choice(cls, value: int | None) -> int | None:
        if value not in (None, 1):
            raise ValueError(f"only n=1 is supported, got n={value}")
        return value

    @field_validator("stop")
    @classmethod
    def no_empty_stop(cls, value: str | list[str] | None) -> str | list[str] | None:
        if value == "" or (isinstance(value, list) and "" in value):
            raise ValueError("stop strings must not be empty (an empty stop would match at once)")
        if isinstance(value, list) and len(value) > MAX_STOPS:
            raise ValueError(f"at most {MAX_STOPS} stop strings are allowed, got {len(value)}")
        longest = max(map(len, [value] if isinstance(value, str) else value or [""]))
        if longest > MAX_STOP_CHARS:
            raise ValueError(f"a stop string may be at most {MAX_STOP_CHARS:,} characters long, got {longest:,}")
        return value

    @field_validator("logit_bias")
    @classmethod
    def token_id_keys(cls, value: dict[str, float] | None) -> dict[str, float] | None:
        for key in value or {}:
            if not key.isascii() or not key.isdigit():
                raise ValueError(f"logit_bias keys are token ids written as strings, got {key!r}")
        return value

    def stop_strings(self) -> tuple[str, ...]:
        return (self.stop,) if isinstance(self.stop, str) else tuple(self.stop or ())


# ----------------------------------------------------------------- the two requests


class ChatCompletionRequest(SamplingFields):
    """POST /v1/chat/completions."""

    messages: Annotated[list[ChatMessage], Field(max_length=MAX_MESSAGES, json_schema_extra={"minItems": 1})]
    max_completion_tokens: int | None = Field(None, ge=1)
    tools: Annotated[list[ToolDefinition], Field(max_length=MAX_TOOLS)] | None = None
    # "required" and a named function force a call: the reply is constrained to the tool's parameters (lab-08).
    # The OpenAPI document lists only the unconstrained values: a fuzzer (schemathesis) then explores the
    # rest of the API instead of compiling random grammars; tests/test_server_structured.py covers these.
    tool_choice: Annotated[Literal["none", "auto", "required"] | NamedToolChoice | None, nullable(
        {"type": "string", "enum": ["none", "auto"]})] = None
    parallel_tool_calls: bool | None = None
    response_format: Annotated[ResponseFormat | None, nullable({
        "type": "object", "properties": {"type": {"const": "text"}}, "required": ["type"],
        "additionalProperties": False})] = None
    logprobs: Annotated[bool | None, nullable({"const": False})] = None
    top_logprobs: Annotated[int | None, nullable({"const": 0})] = Field(None, ge=0, le=20)
    # Checked, no effect.
    metadata: dict[str, str] | None = None
    store: Annotated[bool | None, nullable({"const": False})] = None
    service_tier: Literal["auto", "default", "flex", "scale", "priority"] | None = None
    reasoning_effort: Literal["none", "minimal", "low", "medium", "high"] | None = None
    verbosity: Literal["low", "medium", "high"] | None = None
    prompt_cache_key: str | None = None
    safety_identifier: str | None = None
    modalities: Annotated[list[Literal["text", "audio"]] | None, nullable(
        {"type": "array", "items": {"const": "text"}})] = None
    # Refused whenever present (anything but null).
    audio: Annotated[Any, documented(NULL)] = None
    prediction: Annotated[Any, documented(NULL)] = None
    web_search_options: Annotated[Any, documented(NULL)] = None
    functions: Annotated[Any, documented(NULL)] = None
    function_call: Annotated[Any, documented(NULL)] = None
    # vLLM's extensions.
    include_reasoning: bool = True
    chat_template_kwargs: ChatTemplateKwargs | None = None

    non_empty = field_validator("messages")(non_empty_messages)

    @field_validator("audio", "prediction", "web_search_options", "functions", "function_call", mode="before")
    @classmethod
    def refused(cls, value: Any) -> Any:
        if value is not None:
            raise ValueError("not supported by this server (the toy model writes text only; use tools, not functions)")
        return value

    @field_validator("modalities")
    @classmethod
    def text_only(cls, value: list[str] | None) -> list[str] | None:
        if value and "audio" in value:
            raise refuse("modalities 'audio'", "the toy model writes text only")
        return value

    @field_validator("store")
    @classmethod
    def nothing_stored(cls, value: bool | None) -> bool | None:
        if value:
            raise refuse("store=true", "nothing is stored; send false or leave it out")
        return value

    @field_validator("logprobs")
    @classmethod
    def no_logprobs(cls, value: bool | None) -> bool | None:
        if value:
            raise refuse("logprobs", f"{NOT_SCRIPTABLE}, so there are no probabilities to report")
        return value

    @field_validator("top_logprobs")
    @classmethod
    def no_top_logprobs(cls, value: int | None) -> int | None:
        if value:
            raise refuse("top_logprobs", f"{NOT_SCRIPTABLE}, so there are no probabilities to report")
        return value

    @field_validator("response_format")
    @classmethod
    def format_has_a_schema(cls, value: ResponseFormat | None) -> ResponseFormat | None:
        if value is not None and value.type == "json_schema":
            schema = (value.json_schema or {}).get("schema")
            if not isinstance(schema, dict):
                raise ValueError("response_format json_schema needs json_schema.schema, a JSON Schema object")
        return value

    @field_validator("tool_choice")
    @classmethod
    def tool_choice_fits_tools(cls, choice: Any, info: ValidationInfo) -> Any:
        if choice == "required" or isinstance(choice, NamedToolChoice):
            tools = info.data.get("tools") or []
            if not tools:
                raise ValueError("a required or named tool choice needs `tools`")
            if isinstance(choice, NamedToolChoice) and choice.function.name not in {t.function.name for t in tools}:
                raise ValueError(f"no tool named {choice.function.name!r} in `tools`")
        return choice

    def constraint(self) -> Constraint | None:
        """The grammar the reply must match: a forced call, else ``response_format``'s JSON, else None."""
        tools = self.tools or []
        for i, tool in enumerate(tools):
            if tool.function.strict:
                strict_rules(tool.function.parameters or {}, f"tools[{i}].function.parameters",
                             f"function '{tool.function.name}'")
        if self.tool_choice == "required":
            return tool_call_constraint([(t.function.name, t.function.parameters) for t in tools], "tools")
        if isinstance(self.tool_choice, NamedToolChoice):
            wanted = self.tool_choice.function.name
            at, tool = next((i, t) for i, t in enumerate(tools) if t.function.name == wanted)  # the validator checked
            return tool_call_constraint([(tool.function.name, tool.function.parameters)],
                                        f"tools[{at}].function.parameters")
        fmt = self.response_format
        if fmt is None or fmt.type == "text":
            return None
        if fmt.type == "json_object":
            return json_object_constraint("response_format json_object")
        if (fmt.json_schema or {}).get("strict") is True:
            strict_rules((fmt.json_schema or {})["schema"], "response_format.json_schema.schema",
                         f"response_format '{(fmt.json_schema or {}).get('name', '')}'")
        return schema_constraint((fmt.json_schema or {})["schema"], "response_format.json_schema.schema",
                                 "response_format json_schema")

    def parses_tool_calls(self) -> bool:
        """Calls are parsed only when the client offered tools and did not say ``tool_choice: none``.

        Otherwise a ``<tool_call>`` the model writes is plain text, as vLLM sends it.
        """
        return bool(self.tools) and self.tool_choice != "none"

    def completion_limit(self) -> int | None:
        return self.max_completion_tokens if self.max_completion_tokens is not None else self.max_tokens


class CompletionRequest(SamplingFields):
    """POST /v1/completions (the legacy text endpoint): one prompt string, one choice."""

    prompt: Annotated[str, Field(json_schema_extra={"minLength": 1})]
    echo: Annotated[bool | None, nullable({"const": False}, False)] = False
    best_of: Annotated[int | None, nullable({"const": 1})] = None
    suffix: Annotated[str | None, documented(NULL)] = None
    logprobs: Annotated[int | None, documented(NULL)] = Field(None, ge=0, le=5)

    @field_validator("prompt", mode="before")
    @classmethod
    def one_prompt(cls, value: Any) -> Any:
        if isinstance(value, list):
            raise ValueError("only a single string prompt is supported (no lists of prompts or token ids)")
        if value == "":
            raise ValueError("prompt must be a non-empty string")
        return value

    @field_validator("echo")
    @classmethod
    def no_echo(cls, value: bool | None) -> bool | None:
        if value:
            raise refuse("echo", "the prompt is not sent back; send false")
        return value

    @field_validator("best_of")
    @classmethod
    def one_candidate(cls, value: int | None) -> int | None:
        if value not in (None, 1):
            raise ValueError(f"only best_of=1 is supported, got {value}")
        return value

    @field_validator("suffix")
    @classmethod
    def no_suffix(cls, value: str | None) -> str | None:
        if value is not None:
            raise refuse("suffix", "the toy model does not fill in the middle")
        return value

    @field_validator("logprobs")
    @classmethod
    def no_logprobs(cls, value: int | None) -> int | None:
        if value is not None:
            raise refuse("logprobs", f"{NOT_SCRIPTABLE}, so there are no probabilities to report")
        return value

    def completion_limit(self) -> int | None:
        return self.max_tokens
