"""Lab 02 starter: the output pipeline behind an OpenAI-compatible server.

Fill in the tasks below (see README.md, "Your task"). The server shell is given
(mini_vllm/server/); it calls this module for every request. Run the tests with:

    make lab-02

Load the other labs' components with ``load_lab("lab-03")`` etc., never by file name:
then ``LAB_IMPL=starter`` serves your own detokenizer, stop checker and tool parser.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mini_vllm.labs import load_lab  # noqa: F401 (to load labs 01, 03, 04, 05 and 06)
from mini_vllm.labtypes.lab02 import StepOutput  # given: the lab's value types
from mini_vllm.sampling import SamplingParams
from mini_vllm.tokenizers.base import Tokenizer
from mini_vllm.tokenizers.byte import ByteTokenizer  # noqa: F401 (to pick the right detokenizer)


class OutputPipeline:
    """Turns one request's token ids into text and tool calls, with OpenAI's finish reasons."""

    def __init__(self, tokenizer: Tokenizer, prompt_ids: Sequence[int], params: SamplingParams,
                 parse_tool_calls: bool, parse_reasoning: bool = False, starts_in_reasoning: bool = False) -> None:
        raise NotImplementedError("lab-02 task 1: implement OutputPipeline.__init__ — see README, 'Your task'")

    @property
    def stopped(self) -> bool:
        """A stop string has matched: the reply is over, whatever the engine does next."""
        raise NotImplementedError("lab-02 task 1: implement OutputPipeline.stopped — see README, 'Your task'")

    def push(self, token_ids: int | Sequence[int]) -> StepOutput:
        """One engine step: a token id, or several (a speculative decoder's accepted tokens)."""
        raise NotImplementedError("lab-02 task 1: implement OutputPipeline.push — see README, 'Your task'")

    def finish(self, engine_finish_reason: str) -> StepOutput:
        """The engine is done ("stop" at EOS, "length" at max_tokens): release every hold-back."""
        raise NotImplementedError("lab-02 task 2: implement OutputPipeline.finish — see README, 'Your task'")


class ChunkFormatter:
    """Turns StepOutputs into OpenAI streaming chunks: ``chat.completion.chunk`` or ``text_completion``."""

    def __init__(self, kind: str, request_id: str, model: str, created: int) -> None:
        if kind not in ("chat", "completion"):
            raise ValueError(f"kind must be 'chat' or 'completion', got {kind!r}")
        self.kind, self.request_id, self.model, self.created = kind, request_id, model, created

    def chunks(self, out: StepOutput) -> list[dict[str, Any]]:
        """The chunks for one StepOutput; never one whose only news is empty text."""
        raise NotImplementedError("lab-02 task 3: implement ChunkFormatter.chunks — see README, 'Your task'")

    def usage_chunk(self, prompt_tokens: int, completion_tokens: int) -> dict[str, Any]:
        """The extra last chunk of ``stream_options.include_usage``: no choices, just the counts. (Given.)"""
        usage = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                 "total_tokens": prompt_tokens + completion_tokens}
        kind = "chat.completion.chunk" if self.kind == "chat" else "text_completion"
        return {"id": self.request_id, "object": kind, "created": self.created, "model": self.model,
                "choices": [], "usage": usage}
