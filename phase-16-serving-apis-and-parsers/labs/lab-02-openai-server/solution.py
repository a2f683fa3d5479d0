"""Lab 02 reference solution: the output pipeline behind an OpenAI-compatible server.

Engine token ids go through four hold-back stages, each from its own lab, loaded
through the LAB_IMPL loader (so the server runs whoever's code LAB_IMPL chooses):

    token ids -> detokenizer (lab-03 bytes / lab-04 BPE)
             -> reasoning parser (lab-06, chat only): the thought goes out as it is
             -> on the answer only: stop strings (lab-05) -> tool-call parser (lab-01, chat only)
             -> StepOutput -> OpenAI chunks

One engine step may bring several token ids (speculative decoding, or a stream
interval above 1); the output never depends on how the ids were grouped.

Each stage only ever passes on text it is sure of, so the stages compose without
knowing about each other: the reasoning parser and the stop checker never see half a
character, a stop string never matches inside a thought, and the tool parser never
sees text past a stop string.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from mini_vllm.labs import load_lab
from mini_vllm.labtypes.lab02 import StepOutput  # given: the lab's value types
from mini_vllm.sampling import SamplingParams
from mini_vllm.tokenizers.base import Tokenizer
from mini_vllm.tokenizers.byte import ByteTokenizer


class OutputPipeline:
    """Turns one request's token ids into text and tool calls, with OpenAI's finish reasons."""

    def __init__(self, tokenizer: Tokenizer, prompt_ids: Sequence[int], params: SamplingParams,
                 parse_tool_calls: bool, parse_reasoning: bool = False, starts_in_reasoning: bool = False) -> None:
        self._detokenize: Callable[[int], str]
        self._flush_text: Callable[[], str]
        if isinstance(tokenizer, ByteTokenizer):  # one byte per token: the byte-level detokenizer
            detokenizer = load_lab("lab-03").StreamingDetokenizer(tokenizer)
            self._detokenize, self._flush_text = detokenizer.feed, detokenizer.flush
        else:  # BPE: the window-diff detokenizer on tokenizer.decode
            detokenizer = load_lab("lab-04").IncrementalDetokenizer(
                tokenizer, prompt_ids, skip_special_tokens=params.skip_special_tokens)
            self._detokenize, self._flush_text = detokenizer.push, detokenizer.flush
        self._stops = load_lab("lab-05").StopStringChecker(list(params.stop), params.include_stop_str_in_output)
        self._tool_lab = load_lab("lab-01")
        self._tool_parser = self._tool_lab.StreamingToolParser(stream_arguments=True) if parse_tool_calls else None
        self._made_calls = False
        # Before the stop strings: a stop word in the thought must not end the reply.
        self._reasoning_parser = (load_lab("lab-06").StreamingReasoningParser(starts_in_reasoning=starts_in_reasoning)
                                  if parse_reasoning else None)
        self._calls_named = 0  # calls whose name went out: they are on the wire, whatever happens next
        self._calls_closed = 0

    @property
    def stopped(self) -> bool:
        """A stop string has matched: the reply is over, whatever the engine does next."""
        return bool(self._stops.stopped)

    def push(self, token_ids: int | Sequence[int]) -> StepOutput:
        """One engine step: a token id, or several (a speculative decoder's accepted tokens)."""
        ids = [token_ids] if isinstance(token_ids, int) else token_ids
        return self._after_detokenizer("".join(self._detokenize(token_id) for token_id in ids))

    def _after_detokenizer(self, text: str) -> StepOutput:
        """Thought to its channel at once; the answer on through the stop strings and the tool parser."""
        reasoning, answer = self._split_reasoning(text)
        out = self._route(self._stops.feed(answer))
        out.reasoning = reasoning
        return out

    def _split_reasoning(self, text: str) -> tuple[str, str]:
        if self._reasoning_parser is None or not text:
            return "", text
        delta = self._reasoning_parser.feed(text)
        return delta.reasoning, delta.content

    def finish(self, engine_finish_reason: str) -> StepOutput:
        """The engine is done ("stop" at EOS, "length" at max_tokens): release every hold-back."""
        cut_by_length = engine_finish_reason == "length" and not self.stopped
        reasoning, answer = self._split_reasoning(self._flush_text())
        if self._reasoning_parser is not None:  # a thought cut by max_tokens stays a thought
            last = self._reasoning_parser.finish()
            reasoning, answer = reasoning + last.reasoning, answer + last.content
        out = self._route(self._stops.feed(answer) + self._stops.flush())
        out.reasoning = reasoning
        if self._tool_parser is not None:
            try:
                self._add(out, self._tool_parser.finish())
            except self._tool_lab.ToolCallParseError as error:
                if not cut_by_length:
                    raise
                # max_tokens ran out inside a call. Once its name is out, the client has a
                # (truncated) call and finish_reason "length" says why; before that, show what
                # the model wrote as text rather than lose it.
                if self._calls_named == self._calls_closed:
                    out.text += self._tool_lab.START_TAG + error.raw
        out.stop_reason = self._stops.stop_reason
        out.finish_reason = "length" if cut_by_length else "tool_calls" if self._made_calls else "stop"
        return out

    def _route(self, text: str) -> StepOutput:
        if self._tool_parser is None or not text:
            return StepOutput(text)
        return self._add(StepOutput(), self._tool_parser.feed(text))

    def _add(self, out: StepOutput, delta: Any) -> StepOutput:
        """Append a lab-01 DeltaMessage to ``out``, keeping count of the calls on the wire."""
        out.text += delta.content
        out.tool_calls += delta.tool_calls
        out.tool_call_deltas += delta.tool_call_deltas
        self._calls_named += sum(d.name is not None for d in delta.tool_call_deltas)
        self._calls_closed += len(delta.tool_calls)
        self._made_calls = self._made_calls or self._calls_named > 0 or bool(delta.tool_calls)
        return out


class ChunkFormatter:
    """Turns StepOutputs into OpenAI streaming chunks: ``chat.completion.chunk`` or ``text_completion``."""

    def __init__(self, kind: str, request_id: str, model: str, created: int) -> None:
        if kind not in ("chat", "completion"):
            raise ValueError(f"kind must be 'chat' or 'completion', got {kind!r}")
        self.kind, self.request_id, self.model, self.created = kind, request_id, model, created
        self._sent_role = False

    def chunks(self, out: StepOutput) -> list[dict[str, Any]]:
        """The chunks for one StepOutput; never one whose only news is empty text."""
        if self.kind == "completion":
            pieces = [self._choice({"text": out.text})] if out.text else []
            if out.finish_reason:
                pieces.append(self._choice({"text": ""}, out.finish_reason, out.stop_reason))
            return [self._chunk(choice) for choice in pieces]
        deltas: list[dict[str, Any]] = []
        if not self._sent_role:  # the first chunk of a chat stream says who is speaking
            deltas.append({"role": "assistant"})
            self._sent_role = True
        for key, value in (("reasoning", out.reasoning), ("content", out.text)):  # thought first, as written
            if value:
                if deltas:
                    deltas[0][key] = value
                else:
                    deltas.append({key: value})
        # Calls go out as they stream; out.tool_calls (the same calls, whole) needs no chunk of its own.
        entries = [self._tool_call_entry(d) for d in out.tool_call_deltas if d.name is not None or d.arguments_fragment]
        if entries:
            deltas.append({"tool_calls": entries})
        choices = [self._choice({"delta": delta}) for delta in deltas]
        if out.finish_reason:
            choices.append(self._choice({"delta": {}}, out.finish_reason, out.stop_reason))
        return [self._chunk(choice) for choice in choices]

    def _tool_call_entry(self, delta: Any) -> dict[str, Any]:
        """OpenAI's shape: a call's first entry names it (id, type, name); later ones carry only arguments."""
        if delta.name is None:
            return {"index": delta.index, "function": {"arguments": delta.arguments_fragment}}
        call_id = f"call_{self.request_id.split('-')[-1][:16]}_{delta.index}"
        return {"index": delta.index, "id": call_id, "type": "function",
                "function": {"name": delta.name, "arguments": delta.arguments_fragment}}

    def _choice(self, body: dict[str, Any], finish_reason: str | None = None,
                stop_reason: str | None = None) -> dict[str, Any]:
        choice = {"index": 0, **body, "logprobs": None, "finish_reason": finish_reason}
        if finish_reason:
            choice["stop_reason"] = stop_reason
        return choice

    def _chunk(self, choice: dict[str, Any]) -> dict[str, Any]:
        return {"id": self.request_id, "object": self._object, "created": self.created, "model": self.model,
                "choices": [choice]}

    @property
    def _object(self) -> str:
        return "chat.completion.chunk" if self.kind == "chat" else "text_completion"

    def usage_chunk(self, prompt_tokens: int, completion_tokens: int) -> dict[str, Any]:
        """The extra last chunk of ``stream_options.include_usage``: no choices, just the counts."""
        usage = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                 "total_tokens": prompt_tokens + completion_tokens}
        return {"id": self.request_id, "object": self._object, "created": self.created, "model": self.model,
                "choices": [], "usage": usage}
