"""Lab 10 solution: messages in, token ids out, and no client text ever becomes a control token.

A prompt is built as segments: ``control`` (one special token, chosen by the structure of the chat)
and ``text`` (everything else: the template's own words and every piece of client text), and each
text segment is encoded as text (``encode_ordinary``), so a special string a client writes is only
ever its characters. ChatML for the course's own vocabularies, Mistral's format exactly as
mistral-common encodes it for ``mistral`` (v1) and ``tekken`` (v3).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from typing import Any

from mini_vllm.labtypes.lab10 import (
    AVAILABLE_TOOLS,
    BOS,
    END_AVAILABLE_TOOLS,
    END_INST,
    END_TOOL_RESULTS,
    EOS,
    IM_END,
    IM_START,
    INST,
    ROLES,
    THINK_CLOSE,
    THINK_OPEN,
    TOOL_CALL_CLOSE,
    TOOL_CALL_OPEN,
    TOOL_CALLS,
    TOOL_RESPONSE_CLOSE,
    TOOL_RESPONSE_OPEN,
    TOOL_RESULTS,
    TOOLS_FOOTER,
    TOOLS_HEADER,
    ChatTemplateError,
    Message,
    Segment,
    Tool,
    ToolCall,
)
from mini_vllm.tokenizers.base import OrdinaryEncoder

__all__ = ["ROLES", "ChatTemplateError", "Message", "Segment", "Tool", "ToolCall", "chatml_segments",
           "encode_segments", "encode_text", "mistral_segments", "render", "render_chatml", "render_mistral",
           "special_tokens"]


@functools.lru_cache(maxsize=16)  # Tekken has 1,000 special tokens: read their names once per tokenizer
def special_tokens(tokenizer: OrdinaryEncoder) -> dict[str, int]:
    """Every special token of the vocabulary, by its string (given: not the lesson; do not change the dict)."""
    ids = list(tokenizer.all_special_ids)
    return dict(zip(tokenizer.convert_ids_to_tokens(ids), ids, strict=True))


# ----------------------------------------------------------------------------- task 1


def encode_text(tokenizer: OrdinaryEncoder, text: str, at_start: bool = False) -> list[int]:
    """``text`` as text: no special id whatever it holds, and ``decode`` gives it back."""
    return tokenizer.encode_ordinary(text, at_start=at_start)


def encode_segments(tokenizer: OrdinaryEncoder, segments: Sequence[Segment]) -> list[int]:
    """A control segment is its one special id (refused if the vocabulary has none); a text segment its text."""
    specials = special_tokens(tokenizer)
    ids: list[int] = []
    for segment in segments:
        if segment.kind == "control":
            if segment.text not in specials:
                raise ChatTemplateError(f"{segment.text!r} is not a special token of this vocabulary")
            ids.append(specials[segment.text])
        else:
            ids.extend(encode_text(tokenizer, segment.text, segment.at_start))
    return ids


class _Builder:
    """Segments in order; text written next to text joins it, so a run between two control tokens is
    encoded as one text, as a template's output would be (BPE merges across the seam)."""

    def __init__(self) -> None:
        self.segments: list[Segment] = []

    def control(self, token: str) -> None:
        self.segments.append(Segment("control", token))

    def text(self, text: str, at_start: bool = False) -> None:
        if not text:
            return
        last = self.segments[-1] if self.segments else None
        if last is not None and last.kind == "text" and not at_start:
            self.segments[-1] = Segment("text", last.text + text, last.at_start)
        else:
            self.segments.append(Segment("text", text, at_start))


def _check_flags(add_generation_prompt: bool, continue_final_message: bool, messages: Sequence[Message]) -> None:
    if add_generation_prompt and continue_final_message:
        raise ChatTemplateError("add_generation_prompt and continue_final_message cannot both be set: the first "
                                "opens a new assistant turn, the second continues the last message")
    if continue_final_message and (not messages or messages[-1].role != "assistant"):
        raise ChatTemplateError("continue_final_message needs the last message to be the assistant's")


# ----------------------------------------------------------------------------- task 2


def _arguments_object(call: ToolCall) -> Any:
    try:
        return json.loads(call.arguments)
    except json.JSONDecodeError as error:
        raise ChatTemplateError(f"tool call {call.id!r}: arguments are not JSON ({error})") from None


def chatml_segments(messages: Sequence[Message], tools: Sequence[Tool] = (), add_generation_prompt: bool = False,
                    continue_final_message: bool = False) -> list[Segment]:
    """ChatML (Qwen's template): every turn ``<|im_start|>role\\n ... <|im_end|>\\n``, tools in the system turn."""
    _check_flags(add_generation_prompt, continue_final_message, messages)
    out = _Builder()
    first_system = bool(messages) and messages[0].role == "system"
    if tools or first_system:
        out.control(IM_START)
        out.text("system\n")
        if first_system:
            out.text(messages[0].content)
        if tools:
            out.text("\n\n" if first_system else "")
            out.text(TOOLS_HEADER + "".join("\n" + json.dumps(t.as_openai(), ensure_ascii=False) for t in tools)
                     + TOOLS_FOOTER)
        out.control(IM_END)
        out.text("\n")
    last_user = max((k for k, m in enumerate(messages) if m.role == "user"), default=-1)
    for k, message in enumerate(messages):
        closes = not (k == len(messages) - 1 and continue_final_message)
        if message.role == "system" and k == 0:
            continue
        if message.role in ("system", "user"):
            out.control(IM_START)
            out.text(f"{message.role}\n{message.content}")
        elif message.role == "assistant":
            out.control(IM_START)
            out.text("assistant\n")
            if message.reasoning and k > last_user:  # an ongoing tool loop keeps its thoughts; earlier turns don't
                out.text(THINK_OPEN + message.reasoning + THINK_CLOSE)
            out.text(message.content)
            for n, call in enumerate(message.tool_calls):
                body = json.dumps({"name": call.name, "arguments": _arguments_object(call)}, ensure_ascii=False)
                out.text(("\n" if message.content or n else "") + TOOL_CALL_OPEN + body + TOOL_CALL_CLOSE)
        elif message.role == "tool":
            opens = k == 0 or messages[k - 1].role != "tool"
            if opens:
                out.control(IM_START)
                out.text("user")
            out.text("\n" + TOOL_RESPONSE_OPEN + message.content + TOOL_RESPONSE_CLOSE)
            closes = k == len(messages) - 1 or messages[k + 1].role != "tool"
        else:
            raise ChatTemplateError(f"messages[{k}].role {message.role!r} is none of {', '.join(ROLES)}")
        if closes:
            out.control(IM_END)
            out.text("\n")
    if add_generation_prompt:
        out.control(IM_START)
        out.text("assistant\n")
    return out.segments


def render_chatml(tokenizer: OrdinaryEncoder, messages: Sequence[Message], tools: Sequence[Tool] = (),
                  add_generation_prompt: bool = False, continue_final_message: bool = False) -> list[int]:
    return encode_segments(tokenizer, chatml_segments(messages, tools, add_generation_prompt, continue_final_message))


# ----------------------------------------------------------------------------- task 3


def _json_or_text(text: str) -> Any:
    """mistral-common's reading of a tool's arguments or result: JSON when it parses, else the text."""
    if not text:
        return {}
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def _normalized(messages: Sequence[Message]) -> tuple[str | None, list[Message]]:
    """mistral-common's normalizer: the system prompts joined apart, consecutive turns of one role joined,
    and an empty user turn first when the chat does not start with one."""
    system = [m.content for m in messages if m.role == "system" and m.content]
    rest: list[Message] = []
    previous = ""
    for m in messages:
        joins = m.role == previous and m.role in ("user", "assistant")  # a system message between two ends a run
        previous = m.role
        if m.role == "system":
            continue
        if joins:
            prev = rest[-1]
            joined = "\n\n".join(c for c in (prev.content, m.content) if c)
            rest[-1] = Message(m.role, joined, None, prev.tool_calls + m.tool_calls)
        else:
            rest.append(m)
    if not rest or rest[0].role != "user":
        rest.insert(0, Message("user", ""))
    return ("\n\n".join(system) if system else None), rest


def mistral_segments(tokenizer: OrdinaryEncoder, messages: Sequence[Message], tools: Sequence[Tool] = (),
                     continue_final_message: bool = False) -> list[Segment]:
    """Mistral's format for this vocabulary: v3 where ``[INST]`` is a special token (Tekken), else v1."""
    _check_flags(False, continue_final_message, messages)
    if messages and messages[-1].role == "assistant" and not continue_final_message:
        raise ChatTemplateError("Mistral's prompt ends with the user's or a tool's message, or an assistant prefill "
                                "(continue_final_message)")
    system, chat = _normalized(messages)
    v3 = INST in special_tokens(tokenizer)
    if not v3 and any(m.role == "tool" or m.tool_calls for m in chat):  # offered tools are left out, as there
        raise ChatTemplateError("Mistral's v1 format (Mistral 7B v0.1) has no tool calls or tool results")
    users = [k for k, m in enumerate(chat) if m.role == "user"]
    out = _Builder()
    out.control(BOS)
    for k, m in enumerate(chat):
        prefix = continue_final_message and k == len(chat) - 1
        if m.role == "user":
            text = m.content
            if system and k == (users[-1] if v3 else users[0]):  # v1: first user turn; v3: the last one
                text = system + "\n\n" + text
            if not v3:
                out.text(f"{INST} {text} {END_INST}", at_start=True)  # v1: [INST] is text, encoded in one piece
                continue
            if tools and k == users[-1]:
                offered = json.dumps([t.as_openai() for t in tools], ensure_ascii=False)
                out.control(AVAILABLE_TOOLS)
                out.text(offered, at_start=True)
                out.control(END_AVAILABLE_TOOLS)
            out.control(INST)
            out.text(text, at_start=True)
            out.control(END_INST)
        elif m.role == "assistant":
            if m.tool_calls and m.content:
                raise ChatTemplateError(f"an assistant message has both content and tool calls (message {k})")
            if m.tool_calls:
                calls = [{"name": c.name, "arguments": _json_or_text(c.arguments), "id": c.id} for c in m.tool_calls]
                out.control(TOOL_CALLS)
                out.text(json.dumps(calls, ensure_ascii=False), at_start=True)
            elif m.content:
                out.text(m.content.rstrip(" ") if v3 else m.content, at_start=True)
            else:
                raise ChatTemplateError(f"an assistant message with neither content nor tool calls (message {k})")
            if not prefix:
                out.control(EOS)
        else:  # a tool's result
            result = {"content": _json_or_text(m.content), "call_id": m.tool_call_id}
            out.control(TOOL_RESULTS)
            out.text(json.dumps(result, ensure_ascii=False), at_start=True)
            out.control(END_TOOL_RESULTS)
    return out.segments


def render_mistral(tokenizer: OrdinaryEncoder, messages: Sequence[Message], tools: Sequence[Tool] = (),
                   continue_final_message: bool = False) -> list[int]:
    return encode_segments(tokenizer, mistral_segments(tokenizer, messages, tools, continue_final_message))


# ----------------------------------------------------------------------------- task 4


def render(tokenizer: OrdinaryEncoder, messages: Sequence[Message], tools: Sequence[Tool] = (),
           add_generation_prompt: bool = True, continue_final_message: bool = False) -> list[int]:
    """The prompt's ids in the vocabulary's own format: ChatML where ``<|im_start|>`` is a special token, else
    Mistral's. A generation prompt or a prefill (never both); BOS exactly once where the format has one."""
    _check_flags(add_generation_prompt, continue_final_message, messages)
    if IM_START in special_tokens(tokenizer):
        return render_chatml(tokenizer, messages, tools, add_generation_prompt, continue_final_message)
    # Mistral's prompt always ends ready for the reply ([/INST] or a tool's result): the generation prompt is
    # the format's own. Its BOS is written by the structure, so it is not added again here.
    return render_mistral(tokenizer, messages, tools, continue_final_message)
