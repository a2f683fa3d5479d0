"""``POST /v1/chat/completions`` and ``POST /v1/completions``: lab-02's chunks, streamed or merged.

A request reads top to bottom: the route reads and checks its body, the runner prepares,
admits and generates it, the engine streams token ids, lab-02's ``OutputPipeline`` turns them
into text, thoughts and calls, and lab-02's ``ChunkFormatter`` into OpenAI chunks, which
:class:`ChatFraming` shapes for the wire (``include_reasoning``, ``parallel_tool_calls``).
"""

from __future__ import annotations

import time
from types import ModuleType
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response

from mini_vllm.api.models import ChatCompletionRequest, CompletionRequest
from mini_vllm.api.protocol import GenerationRequest, check_model, from_chat, from_completion
from mini_vllm.api.response_bodies import SSE_DOC, ChatCompletionResponse, CompletionResponse, error_responses
from mini_vllm.engine import Engine
from mini_vllm.server.bodies import body_doc, read_body, small_body
from mini_vllm.server.runner import Generation, Step, admit, data_frames, generate, not_implemented, prepare, respond

ERRORS = error_responses(400, 404, 413, 500, 501, 503)


def chat_router(engine: Engine, model_name: str, lab: ModuleType, reasoning: bool = True,
                reasoning_field: str = "reasoning") -> APIRouter:
    """Both OpenAI text routes over ``engine``; ``lab`` is the module with ``OutputPipeline`` and ``ChunkFormatter``."""
    router = APIRouter()

    @router.post("/v1/chat/completions", responses={200: {"model": ChatCompletionResponse, "content": SSE_DOC},
                                                    **ERRORS}, openapi_extra=body_doc(ChatCompletionRequest))
    async def chat(request: Request) -> Response:
        body = await read_body(request, ChatCompletionRequest)
        check_model(body.model, model_name)
        generation = await prepare(engine, lambda: from_chat(body), inline=small_body(request),
                                   request=request)
        return await run(request, generation, "chat")

    @router.post("/v1/completions", responses={200: {"model": CompletionResponse, "content": SSE_DOC}, **ERRORS},
                 openapi_extra=body_doc(CompletionRequest))
    async def completions(request: Request) -> Response:
        body = await read_body(request, CompletionRequest)
        check_model(body.model, model_name)
        generation = await prepare(engine, lambda: from_completion(body), inline=small_body(request),
                                   request=request)
        return await run(request, generation, "completion")

    async def run(request: Request, generation: Generation, kind: str) -> Response:
        req = generation.request
        try:
            output = lab.OutputPipeline(engine.tokenizer, generation.prompt_ids, generation.params,
                                        parse_tool_calls=req.parse_tool_calls,
                                        parse_reasoning=reasoning and kind == "chat",
                                        starts_in_reasoning=reasoning and req.enable_thinking)
            formatter = lab.ChunkFormatter(kind, generation.request_id, model_name, int(time.time()))
        except NotImplementedError as error:
            raise not_implemented(error) from None
        await admit(request, engine, generation)
        steps = generate(engine, generation, output, ChatFraming(req, formatter, len(generation.prompt_ids),
                                                                 reasoning_field))
        return await respond(request, steps, req.stream, data_frames,
                             lambda chunks: merge_chunks(chunks, kind, reasoning_field))

    return router


class ChatFraming:
    """lab-02's chunks as the client asked for them: the thought under its field name, or not at all
    (``include_reasoning: false``); with ``parallel_tool_calls: false``, the first call only; usage last.

    The pipeline always separates the thought (so it never leaks into the answer); this is
    only about what goes on the wire. A chunk left with nothing to say is dropped.
    """

    def __init__(self, req: GenerationRequest, formatter: Any, prompt_tokens: int, field: str) -> None:
        self.formatter, self.prompt_tokens = formatter, prompt_tokens
        self.include_reasoning, self.field = req.include_reasoning, field
        self.one_call = not req.parallel_tool_calls
        self.usage = req.include_usage or not req.stream  # a whole response always reports usage
        as_is = self.include_reasoning and field == "reasoning" and not self.one_call  # nothing to change
        chunks_of = formatter.chunks
        self.step = chunks_of if as_is else lambda out: self.shape(chunks_of(out))  # the per-token path: one call

    def start(self) -> Step:
        return []

    def end(self, last: Any, completion_tokens: int) -> Step:
        chunks = self.step(last)
        if self.usage:
            chunks.append(self.formatter.usage_chunk(self.prompt_tokens, completion_tokens))
        return chunks

    def fail(self, error: ValueError) -> Step | None:
        return None  # a malformed reply: the stream reports it in-band, a whole response is a 500

    def shape(self, chunks: list[dict[str, Any]]) -> list[dict[str, Any]]:
        shaped = []
        for chunk in chunks:
            emptied = False
            for choice in chunk.get("choices", ()):
                delta = choice.get("delta")
                if not delta:
                    continue
                if "reasoning" in delta:
                    thought = delta.pop("reasoning")
                    if self.include_reasoning:
                        delta[self.field] = thought
                if self.one_call and "tool_calls" in delta:
                    kept = [entry for entry in delta["tool_calls"] if entry["index"] == 0]
                    if kept:
                        delta["tool_calls"] = kept
                    else:
                        del delta["tool_calls"]
                emptied = emptied or (not delta and not choice.get("finish_reason"))
            if not emptied:
                shaped.append(chunk)
        return shaped


def merge_chunks(chunks: list[dict[str, Any]], kind: str, reasoning_field: str = "reasoning") -> dict[str, Any]:
    """The non-streamed response: exactly what the stream would have said, put together (as the openai
    SDK's stream accumulator puts it together)."""
    first = next((c for c in chunks if c.get("choices")), None)
    choices = [c["choices"][0] for c in chunks if c.get("choices")]
    finish_reason = next((c.get("finish_reason") for c in reversed(choices) if c.get("finish_reason")), None)
    stop_reason = next((c.get("stop_reason") for c in reversed(choices) if c.get("stop_reason")), None)
    usage = next((c["usage"] for c in chunks if c.get("usage")), None)
    base = {"id": first["id"] if first else "", "created": first["created"] if first else 0,
            "model": first["model"] if first else "", "usage": usage}
    if kind == "completion":
        text = "".join(c.get("text", "") for c in choices)
        choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish_reason,
                  "stop_reason": stop_reason}
        return {**base, "object": "text_completion", "choices": [choice]}
    content = "".join(c["delta"].get("content") or "" for c in choices)
    tool_calls: dict[int, dict[str, Any]] = {}  # index -> the call, its argument fragments joined
    for entry in (e for c in choices for e in c["delta"].get("tool_calls") or []):
        if entry["index"] not in tool_calls:
            tool_calls[entry["index"]] = {"id": entry["id"], "type": entry["type"],
                                          "function": {"name": entry["function"]["name"], "arguments": ""}}
        tool_calls[entry["index"]]["function"]["arguments"] += entry["function"].get("arguments", "")
    message: dict[str, Any] = {"role": "assistant", "content": content or (None if tool_calls else "")}
    thought = "".join(c["delta"].get(reasoning_field) or "" for c in choices)
    if thought:
        message[reasoning_field] = thought
    if tool_calls:
        message["tool_calls"] = [tool_calls[index] for index in sorted(tool_calls)]
    choice = {"index": 0, "message": message, "logprobs": None, "finish_reason": finish_reason,
              "stop_reason": stop_reason}
    return {**base, "object": "chat.completion", "choices": [choice]}
