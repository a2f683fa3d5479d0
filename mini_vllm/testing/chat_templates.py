"""lab-10's oracles: chat templates rendered with jinja2 as Hugging Face renders them, and mistral-common.

Nothing here renders a chat structurally (that is the lab): a template is rendered to *text* (the way
``transformers.apply_chat_template`` does), and mistral-common's ``encode_chat_completion`` gives the ids
Mistral's own library writes. Both are used only where they are right: the template on chats whose client
text holds no special string (on any other the text rendering is the bug the lab fixes), mistral-common
on every chat.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Any, cast

import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment

from mini_vllm.labtypes.lab10 import Message, Tool

CHATML_TEMPLATE = Path(__file__).resolve().parent.parent / "data" / "chatml.jinja"


def _tojson(value: Any, indent: int | None = None, ensure_ascii: bool = False,
            separators: tuple[str, str] | None = None, sort_keys: bool = False) -> str:
    # Hugging Face replaces jinja2's tojson (which escapes <, >, & and ' for HTML) by plain json.dumps
    # that keeps non-ASCII characters as they are.
    return json.dumps(value, indent=indent, ensure_ascii=ensure_ascii, separators=separators, sort_keys=sort_keys)


def _raise(message: str) -> None:
    raise jinja2.exceptions.TemplateError(message)


@cache
def hf_environment() -> ImmutableSandboxedEnvironment:
    """jinja2 set up as ``transformers`` sets it up for chat templates: sandboxed and immutable, blocks trimmed,
    ``loopcontrols``, a ``tojson`` that keeps Unicode, ``raise_exception``."""
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise
    return env


@cache
def course_chatml() -> jinja2.Template:
    return hf_environment().from_string(CHATML_TEMPLATE.read_text(encoding="utf-8"))


def template_messages(messages: tuple[Message, ...] | list[Message]) -> list[dict[str, Any]]:
    """Messages as a template reads them (OpenAI's dicts), a tool call's arguments parsed into an object."""
    rows: list[dict[str, Any]] = []
    for m in messages:
        row: dict[str, Any] = {"role": m.role, "content": m.content}
        if m.reasoning is not None:
            row["reasoning"] = m.reasoning
        row["tool_calls"] = [{"id": c.id, "name": c.name, "arguments": json.loads(c.arguments)} for c in m.tool_calls]
        if m.tool_call_id is not None:
            row["tool_call_id"] = m.tool_call_id
        rows.append(row)
    return rows


def render_chatml_text(messages: tuple[Message, ...] | list[Message], tools: Sequence[Tool] = (),
                       add_generation_prompt: bool = False, continue_final_message: bool = False) -> str:
    """The course's ChatML template rendered to text, as a server that renders templates would."""
    return course_chatml().render(messages=template_messages(messages), tools=[t.as_openai() for t in tools],
                                  add_generation_prompt=add_generation_prompt,
                                  continue_final_message=continue_final_message)


# ----------------------------------------------------------------------------- mistral-common


@cache
def mistral_common_tokenizer(family: str) -> Any:
    """mistral-common's own tokenizer for a family's file (``mistral``: v1 SentencePiece, ``tekken``: v3)."""
    from mistral_common.tokens.tokenizers.mistral import MistralTokenizer

    from mini_vllm.tokenizers.mistral import MISTRAL_7B_V01, TEKKEN_240911

    return MistralTokenizer.from_file(str({"mistral": MISTRAL_7B_V01, "tekken": TEKKEN_240911}[family]))


def mistral_common_ids(family: str, messages: tuple[Message, ...] | list[Message],
                       tools: Sequence[Tool] = (), prefix: bool = False) -> list[int]:
    """``encode_chat_completion`` of the same chat: the ids Mistral's library writes (``prefix``: the last
    assistant message is a prefill the model continues)."""
    from mistral_common.protocol.instruct.messages import AssistantMessage, SystemMessage, ToolMessage, UserMessage
    from mistral_common.protocol.instruct.request import ChatCompletionRequest
    from mistral_common.protocol.instruct.tool_calls import Function, FunctionCall
    from mistral_common.protocol.instruct.tool_calls import Tool as MistralTool
    from mistral_common.protocol.instruct.tool_calls import ToolCall as MistralCall

    rows: list[Any] = []
    for k, m in enumerate(messages):
        if m.role == "system":
            rows.append(SystemMessage(content=m.content))
        elif m.role == "user":
            rows.append(UserMessage(content=m.content))
        elif m.role == "tool":
            rows.append(ToolMessage(content=m.content, tool_call_id=m.tool_call_id))
        else:
            calls = [MistralCall(id=c.id, function=FunctionCall(name=c.name, arguments=c.arguments))
                     for c in m.tool_calls] or None
            rows.append(AssistantMessage(content=m.content or None, tool_calls=calls,
                                         prefix=prefix and k == len(messages) - 1))
    offered = [MistralTool(function=Function(name=t.name, description=t.description, parameters=t.parameters))
               for t in tools] or None
    request = ChatCompletionRequest(messages=rows, tools=offered)
    return list(mistral_common_tokenizer(family).encode_chat_completion(request).tokens)


@cache
def mistral_hf_template(family: str) -> jinja2.Template | None:
    """mistral-common's own Hugging Face chat template for the family (``generate_chat_template``), or None
    where the installed mistral-common has no such call."""
    try:
        from mistral_common.integrations.chat_templates.chat_templates import generate_chat_template
        from mistral_common.tokens.tokenizers.base import TokenizerVersion
    except ImportError:
        return None
    # (mypy reads the members of mistral-common's StrEnum as `auto`, hence the cast.)
    version = cast(TokenizerVersion, {"mistral": TokenizerVersion.v1, "tekken": TokenizerVersion.v3}[family])
    text = generate_chat_template(spm=family == "mistral", tokenizer_version=version, image_support=False,
                                  audio_support=False, thinking_support=False, default_system_prompt=None,
                                  plain_thinking_support=False, use_special_token_variables=True,
                                  model_settings_fields=None, reasoning_effort_values=None,
                                  reasoning_effort_default=None)
    return hf_environment().from_string(text)
