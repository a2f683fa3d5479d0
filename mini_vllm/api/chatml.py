"""The ChatML prompt the toy model reads, as the Responses and Messages requests write it.

Both requests become the same prompt (Qwen's template, as ``protocol.chat_prompt`` writes it
for Chat Completions)::

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

from mini_vllm.labtypes.lab10 import Message, ToolCall


def turn(role: str, text: str) -> str:
    return f"<|im_start|>{role}\n{text}<|im_end|>\n"


def call_text(name: str, arguments: str) -> str:
    """A call written back as the model writes it: the envelope around the arguments' own text."""
    return "<tool_call>\n" + json.dumps({"name": name}, ensure_ascii=False)[:-1] + f', "arguments": {arguments}}}' \
        + "\n</tool_call>"


def opening(thinking: bool) -> str:
    return "<|im_start|>assistant\n" + ("<think>\n" if thinking else "")


def with_call(chat: list[Message], call: ToolCall) -> None:
    """A call joins the assistant turn just before it (an assistant's calls are one message), else opens one."""
    if chat and chat[-1].role == "assistant" and not chat[-1].reasoning:
        last = chat[-1]
        chat[-1] = Message("assistant", last.content, None, (*last.tool_calls, call))
    else:
        chat.append(Message("assistant", "", None, (call,)))
