"""lab-10's given values: a chat's messages and tools as the server validated them, a prompt's segments, the error.

Everything a client sends is *text* here: a message's content, its reasoning, a tool call's name and
arguments, a tool's result, a tool's definition. Only the structure of the chat (who speaks, where a
turn starts and ends, where tools are offered) may become control tokens, and a renderer says which
by cutting the prompt into :class:`Segment` s.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

ROLES = ("system", "user", "assistant", "tool")

# ChatML's control tokens (Qwen's template): every turn is <|im_start|>role\n ... <|im_end|>\n.
IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
# The text a ChatML system turn says about the tools offered (Qwen2.5's words; text, not control tokens).
TOOLS_HEADER = ("# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
                "You are provided with function signatures within <tools></tools> XML tags:\n<tools>")
TOOLS_FOOTER = ("\n</tools>\n\nFor each function call, return a json object with function name and arguments "
                "within <tool_call></tool_call> XML tags:\n<tool_call>\n"
                '{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>')
TOOL_CALL_OPEN, TOOL_CALL_CLOSE = "<tool_call>\n", "\n</tool_call>"
TOOL_RESPONSE_OPEN, TOOL_RESPONSE_CLOSE = "<tool_response>\n", "\n</tool_response>"
THINK_OPEN, THINK_CLOSE = "<think>\n", "\n</think>\n\n"

# Mistral's control tokens, by their strings (on Tekken each is one special id; Mistral 7B v0.1's
# SentencePiece vocabulary has only <s> and </s>, and writes [INST] ... [/INST] as text).
BOS, EOS = "<s>", "</s>"
INST, END_INST = "[INST]", "[/INST]"
AVAILABLE_TOOLS, END_AVAILABLE_TOOLS = "[AVAILABLE_TOOLS]", "[/AVAILABLE_TOOLS]"
TOOL_CALLS = "[TOOL_CALLS]"
TOOL_RESULTS, END_TOOL_RESULTS = "[TOOL_RESULTS]", "[/TOOL_RESULTS]"


@dataclass(frozen=True)
class ToolCall:
    """A call an assistant made: its id, the function's name, and ``arguments`` as the client sent them
    (OpenAI's ``function.arguments``: the JSON text of an object)."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class Message:
    """One message of a chat. ``reasoning`` is an assistant's thought (vLLM's ``reasoning_content``);
    ``tool_calls`` an assistant's calls; ``tool_call_id`` the call a ``tool`` message answers."""

    role: str  # one of ROLES
    content: str = ""
    reasoning: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None


@dataclass(frozen=True)
class Tool:
    """A function the model may call: its name, what it does, and its parameters (a JSON Schema)."""

    name: str
    description: str = ""
    parameters: dict[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})

    def as_openai(self) -> dict[str, Any]:
        """The definition as OpenAI's ``tools`` entry spells it (what ChatML and Mistral write in the prompt)."""
        return {"type": "function",
                "function": {"name": self.name, "description": self.description, "parameters": self.parameters}}


@dataclass(frozen=True)
class Segment:
    """A piece of a prompt: ``control`` (one special token, named by its string) or ``text`` (encoded as text,
    whatever it holds). ``at_start``: this text is encoded as the start of a text (SentencePiece's dummy
    prefix ``▁``), as a library that encodes each piece on its own does (mistral-common)."""

    kind: str  # "control" or "text"
    text: str
    at_start: bool = False


class ChatTemplateError(ValueError):
    """A chat this template cannot render (the server answers 400 with this message)."""
