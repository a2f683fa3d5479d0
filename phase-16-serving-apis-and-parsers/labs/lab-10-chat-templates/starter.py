"""Lab 10 starter: messages in, token ids out, and no client text ever becomes a control token.

Fill in the tasks below (see README.md, "Your task"). Run the tests with:

    make lab-10

The tokenizers the tests hand you are the course's five families (``mini_vllm.load_tokenizer``): besides the
protocol (``encode`` matches special-token strings written in its input), each has
``encode_ordinary(text, at_start)``, which never does.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

from mini_vllm.labtypes.lab10 import (  # noqa: F401
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
    """``text`` as text: no special id whatever it holds, ``decode`` gives it back, and a text holding no special
    string encodes as ``encode`` would. ``at_start``: the text starts a text (SentencePiece's dummy prefix)."""
    raise NotImplementedError("lab-10 task 1: implement encode_text — see README, 'Your task'")


def encode_segments(tokenizer: OrdinaryEncoder, segments: Sequence[Segment]) -> list[int]:
    """A control segment is its one special id (ChatTemplateError if the vocabulary has none such); a text
    segment is ``encode_text`` of its text (with its ``at_start``)."""
    raise NotImplementedError("lab-10 task 1: implement encode_segments — see README, 'Your task'")


# ----------------------------------------------------------------------------- task 2


def chatml_segments(messages: Sequence[Message], tools: Sequence[Tool] = (), add_generation_prompt: bool = False,
                    continue_final_message: bool = False) -> list[Segment]:
    """ChatML (Qwen's template, README 'Background'): every turn ``<|im_start|>role\\n ... <|im_end|>\\n``, the
    tools in the system turn, a call's arguments as an object, reasoning only inside an ongoing tool loop."""
    raise NotImplementedError("lab-10 task 2: implement chatml_segments — see README, 'Your task'")


def render_chatml(tokenizer: OrdinaryEncoder, messages: Sequence[Message], tools: Sequence[Tool] = (),
                  add_generation_prompt: bool = False, continue_final_message: bool = False) -> list[int]:
    """The ids of ``chatml_segments``."""
    raise NotImplementedError("lab-10 task 2: implement render_chatml — see README, 'Your task'")


# ----------------------------------------------------------------------------- task 3


def mistral_segments(tokenizer: OrdinaryEncoder, messages: Sequence[Message], tools: Sequence[Tool] = (),
                     continue_final_message: bool = False) -> list[Segment]:
    """Mistral's format exactly as mistral-common encodes it: v3 where ``[INST]`` is a special token of the
    vocabulary (Tekken), else v1 (Mistral 7B v0.1: offered tools left out, a tool call or result refused)."""
    raise NotImplementedError("lab-10 task 3: implement mistral_segments — see README, 'Your task'")


def render_mistral(tokenizer: OrdinaryEncoder, messages: Sequence[Message], tools: Sequence[Tool] = (),
                   continue_final_message: bool = False) -> list[int]:
    """The ids of ``mistral_segments``: equal to mistral-common's ``encode_chat_completion``."""
    raise NotImplementedError("lab-10 task 3: implement render_mistral — see README, 'Your task'")


# ----------------------------------------------------------------------------- task 4


def render(tokenizer: OrdinaryEncoder, messages: Sequence[Message], tools: Sequence[Tool] = (),
           add_generation_prompt: bool = True, continue_final_message: bool = False) -> list[int]:
    """The prompt in the vocabulary's own format (ChatML where ``<|im_start|>`` is a special token, else
    Mistral's): a generation prompt or a prefill, never both (ChatTemplateError); BOS exactly once."""
    raise NotImplementedError("lab-10 task 4: implement render — see README, 'Your task'")
