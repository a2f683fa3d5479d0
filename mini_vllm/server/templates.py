"""A chat's prompt as token ids, rendered by lab-10 (whatever ``LAB_IMPL`` picks), never a string encoded whole.

Chat Completions, Responses and Messages hand the engine the ids of ``lab.render``: control tokens from the
chat's structure only, every piece of client text (content, system prompt, tool results, tool names and
arguments, tool definitions) encoded as text, so a client that writes ``<|im_end|>`` or ``[INST]`` writes
characters. ``byte``, ``bpe`` and ``spm`` speak ChatML; ``mistral`` and ``tekken`` Mistral's format exactly as
mistral-common encodes it. ``/v1/completions`` is the raw-prompt path: its prompt is encoded as it is, special
strings included (a client that sends a raw prompt writes its own control tokens).

While lab-10 is still the starter's stub, the server keeps the text prompt it built before lab-10 (ChatML written
as text, encoded with special-token matching) and says so once, at start.
"""

from __future__ import annotations

import sys
import threading
from typing import Any, Literal

from mini_vllm.api.errors import ApiError
from mini_vllm.api.protocol import GenerationRequest
from mini_vllm.labs import load_lab
from mini_vllm.labtypes.lab10 import THINK_OPEN, ChatTemplateError, Message

FALLBACK_NOTE = ("mini_vllm: lab-10 is still the starter's stub ({error}); chat prompts are written as ChatML text "
                 "and encoded with special-token matching, as before lab-10: client text can write control tokens.")

Prompts = Literal["lab-10", "text"]  # create_app's choice: lab-10's render, or the text prompt always

_lock = threading.Lock()
_chosen: dict[str, Any] = {}


def chat_lab(tokenizer: Any) -> Any | None:
    """lab-10's module, or None while it is the starter's stub (probed once per process, said once)."""
    with _lock:
        if "lab" not in _chosen:
            lab = load_lab("lab-10")
            try:
                lab.render(tokenizer, [Message("user", "hi")])
                _chosen["lab"] = lab
            except NotImplementedError as error:
                print(FALLBACK_NOTE.format(error=error), file=sys.stderr, flush=True)
                _chosen["lab"] = None
        return _chosen["lab"]


def forget() -> None:
    """Probe lab-10 again on the next request (tests that switch ``LAB_IMPL``)."""
    with _lock:
        _chosen.clear()


def rendered_ids(tokenizer: Any, req: GenerationRequest, prompts: Prompts = "lab-10") -> list[int] | None:
    """The prompt's ids by lab-10, or None where the text prompt is used (a raw prompt; lab-10 a stub; the
    server told to use text prompts)."""
    if req.chat is None or prompts == "text":
        return None
    lab = chat_lab(tokenizer)
    if lab is None:
        return None
    try:
        ids = list(lab.render(tokenizer, list(req.chat), list(req.tools), add_generation_prompt=True))
    except ChatTemplateError as error:
        raise ApiError(400, f"{req.prompt_field}: {error}", param=req.prompt_field, code="invalid_value") from None
    if req.enable_thinking:  # the template opens the thought (Qwen3's enable_thinking): the template's text
        ids += tokenizer.encode_ordinary(THINK_OPEN, at_start=False)
    return ids
