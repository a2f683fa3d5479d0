"""The Messages API stream grammar (lab-07 tasks 4-5), as an acceptor that lists every rule a stream breaks.

Written from the API's documented event shapes and from what anthropic-sdk-python's
``MessageStream`` accumulator relies on, never from the lab's solution::

    message_start                                                (task 5)
    per block, index 0, 1, ...; one open at a time:              (task 4)
      content_block_start  content_block_delta*  [signature_delta]  content_block_stop
    message_delta (stop_reason, usage)  message_stop  |  error   (task 5)
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from mini_vllm.testing.responses_grammar import Event, Violation, shorten
from mini_vllm.testing.trace import quote


@dataclass
class _Block:
    index: int
    type: str
    block: dict[str, Any]
    text: str = ""
    signed: bool = False


STOP_REASONS = {"length": "max_tokens", "tool_calls": "tool_use"}


def anthropic_stop_reason(finish_reason: str | None, stop_string: str | None) -> tuple[str, str | None]:
    """Lab-02's finish reason in Anthropic's words: (stop_reason, stop_sequence)."""
    if finish_reason in STOP_REASONS:
        return STOP_REASONS[finish_reason], None
    return ("stop_sequence", stop_string) if stop_string is not None else ("end_turn", None)


def check_messages(events: list[Event], lifecycle: bool = True,
                   stop: tuple[str, str | None] | None = None, output_tokens: int | None = None) -> list[Violation]:
    """Every rule of the Messages grammar the stream breaks; ``stop``: the (stop_reason, stop_sequence) due."""
    found: list[Violation] = []
    blocks: list[_Block] = []
    open_block: _Block | None = None
    unparsed: list[tuple[int, _Block]] = []  # tool_use blocks whose JSON does not parse
    state = "start" if lifecycle else "blocks"

    def bad(index: int, task: int, rule: str, expected: str) -> None:
        found.append(Violation(index, task, rule, expected))

    for i, event in enumerate(events):
        kind = event.get("type", "")
        if state == "start":
            if kind != "message_start":
                bad(i, 5, "a Messages stream opens with message_start", "message_start")
            else:
                message = event.get("message", {})
                if message.get("content") != [] or message.get("role") != "assistant" or message.get("stop_reason"):
                    bad(i, 5, "message_start carries the empty message: role 'assistant', content [], no "
                        "stop_reason yet", "an empty assistant message")
            state = "blocks"
            continue
        if state == "ended":
            bad(i, 5, "nothing may follow message_stop or an error", "no more events")
            continue
        if kind == "error":
            if not (event.get("error") or {}).get("message"):
                bad(i, 5, "an error event carries the error's type and message", "error {'type', 'message'}")
            state = "ended"
            continue
        if kind == "message_delta":
            if open_block is not None:
                bad(i, 4, "every block is closed (content_block_stop) before the message ends",
                    f"content_block_stop for block {open_block.index}")
                open_block = None
            delta, usage = event.get("delta", {}), event.get("usage", {})
            got = (delta.get("stop_reason"), delta.get("stop_sequence"))
            if stop is not None and got != stop:
                bad(i, 5, "message_delta says why the reply ended: end_turn, max_tokens, tool_use, or "
                    "stop_sequence with the stop string that matched", f"stop_reason {stop[0]!r}, "
                    f"stop_sequence {stop[1]!r}")
            if output_tokens is not None and usage.get("output_tokens") != output_tokens:
                bad(i, 5, "message_delta reports the output tokens", f"usage.output_tokens {output_tokens}")
            if got[0] != "max_tokens":
                for at, block in unparsed:
                    bad(at, 4, "a tool_use block's partial_json fragments join to a JSON object (the model's "
                        "arguments text, exactly as written)", f"fragments of a JSON object, not "
                        f"{quote(shorten(block.text))}")
            state = "delta"
            continue
        if kind == "message_stop":
            if state != "delta":
                bad(i, 5, "message_stop follows message_delta", "message_delta")
            state = "ended"
            continue
        if state == "delta":
            bad(i, 5, "after message_delta only message_stop may come", "message_stop")
            continue
        index = event.get("index")
        if kind == "content_block_start":
            if open_block is not None:
                what = "a thinking block left open" if open_block.type == "thinking" else "one block at a time"
                bad(i, 4, f"{what}: block {open_block.index} must be closed (content_block_stop) before the "
                    "next opens", f"content_block_stop for block {open_block.index}")
            if index != len(blocks):
                bad(i, 4, "block indexes count the blocks sent: 0, 1, 2, ...", f"index {len(blocks)}")
            block = event.get("content_block", {})
            _check_new_block(i, block, blocks, bad)
            open_block = _Block(len(blocks), block.get("type", "?"), block)
            blocks.append(open_block)
            continue
        if open_block is None or index != open_block.index:
            bad(i, 4, f"{kind} belongs to the open block" + ("" if open_block else " (none is open)"),
                f"index {open_block.index}" if open_block else "content_block_start first")
            continue
        if kind == "content_block_delta":
            _check_block_delta(i, event.get("delta", {}), open_block, bad)
        elif kind == "content_block_stop":
            if open_block.type == "thinking" and not open_block.signed:
                bad(i, 4, "a thinking block carries a signature: a signature_delta comes before its "
                    "content_block_stop", "content_block_delta with a signature_delta")
            if open_block.type == "tool_use" and not _is_json_object(open_block.text or "{}"):
                unparsed.append((i, open_block))  # fine only if max_tokens cut the call short
            open_block = None
        else:
            bad(i, 4, f"{kind} is not a Messages stream event", "content_block_delta or content_block_stop")
    if lifecycle and state != "ended":
        bad(len(events), 5, "the stream ends with message_delta then message_stop (or an error)", "message_stop")
    if not lifecycle and open_block is not None:
        bad(len(events), 4, "close() closes the open block" + (" (a thinking block left open)" if open_block.type ==
            "thinking" else ""), f"content_block_stop for block {open_block.index}")
    return found


def _is_json_object(text: str) -> bool:
    try:
        return isinstance(json.loads(text), dict)
    except json.JSONDecodeError:
        return False


def _check_new_block(i: int, block: dict[str, Any], blocks: list[_Block], bad: Any) -> None:
    shapes: dict[str, dict[str, Any]] = {"text": {"text": ""}, "thinking": {"thinking": "", "signature": ""},
                                         "tool_use": {"input": {}}}
    kind = block.get("type")
    if kind not in shapes:
        bad(i, 4, "a content block is 'thinking', 'text' or 'tool_use'", "one of those types")
        return
    if any(block.get(k) != v for k, v in shapes[kind].items()):
        bad(i, 4, f"a {kind} block starts empty", ", ".join(f"{k} {v!r}" for k, v in shapes[kind].items()))
    if kind == "tool_use":
        if not (block.get("id") and block.get("name")):
            bad(i, 4, "a tool_use block starts with its id and name", "id and name")
        if any(b.block.get("id") == block.get("id") for b in blocks):
            bad(i, 4, "every tool_use block has its own id", "a new id")


def _check_block_delta(i: int, delta: dict[str, Any], block: _Block, bad: Any) -> None:
    allowed = {"text": "text_delta", "thinking": "thinking_delta", "tool_use": "input_json_delta"}[block.type] \
        if block.type in ("text", "thinking", "tool_use") else "?"
    kind = delta.get("type")
    if block.type == "thinking" and kind == "signature_delta":
        if not delta.get("signature"):
            bad(i, 4, "a signature_delta carries a signature", "a non-empty signature")
        block.signed = True
        return
    if kind != allowed:
        what = {"text": "tool-call or thought text sent as text" if kind == "text_delta" else ""}.get(block.type, "")
        bad(i, 4, f"a {block.type} block grows only by {allowed}" + (f" ({what})" if what else ""), allowed)
        return
    if block.signed:
        bad(i, 4, "the signature closes a thinking block: no thinking_delta after it", "content_block_stop")
    piece = delta.get({"text_delta": "text", "thinking_delta": "thinking", "input_json_delta": "partial_json"}[kind])
    if not isinstance(piece, str) or not piece:
        bad(i, 4, "a delta carries text (no empty deltas)", "a non-empty delta")
        return
    block.text += piece
