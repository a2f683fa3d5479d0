"""Lab-02's reference pipeline, as recorded: the StepOutput streams lab-07's tests and notebook format.

Lab-07 formats a StepOutput stream; its tests need that stream, and what lab-02's chat output
says the reply is (the oracle for every channel). Both were recorded from lab-02's reference
pipeline over the reference labs it composes (by the instructor), so lab-07 grades the
formatters only, whatever ``LAB_IMPL`` says about the other labs, and runs the same in the
student's release, which has no reference to run.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from mini_vllm.testing.recorded import STALE_HINT, load, step_from_data

REPLIES_FILE = "lab07_replies.json.gz"
CHATML_USER = "<|im_start|>user\n{}<|im_end|>\n<|im_start|>assistant\n"


@dataclass(frozen=True)
class Call:
    name: str
    arguments: str  # the arguments' JSON text, as the model wrote it


@dataclass
class ReplyRun:
    """One reply through lab-02's reference pipeline, grouped k tokens per step as the engine groups them."""

    steps: list[Any]  # lab-02 StepOutputs; the last one carries finish_reason (unless the reply failed)
    output_tokens: int
    error: str | None = None  # the pipeline raised (a malformed call): the message the server reports
    reasoning: str = ""  # lab-02's chat output, channel by channel: the oracle
    text: str = ""
    calls: list[Call] = field(default_factory=list)
    finish_reason: str | None = None
    stop_reason: str | None = None

    def sum_up(self) -> ReplyRun:
        """Fill the oracle fields from the steps: the channels joined, each call's name and joined arguments."""
        calls: dict[int, list[str]] = {}
        for step in self.steps:
            self.reasoning += step.reasoning
            self.text += step.text
            for delta in step.tool_call_deltas:
                if delta.name is not None:
                    calls[delta.index] = [delta.name, ""]
                calls[delta.index][1] += delta.arguments_fragment
            self.finish_reason = step.finish_reason or self.finish_reason
            self.stop_reason = step.stop_reason or self.stop_reason
        self.calls = [Call(*calls[index]) for index in sorted(calls)]
        return self


@dataclass(frozen=True)
class TextRun:
    """A reply text (drawn once from the tests' strategies when the data was recorded), and its run."""

    text: str
    tokens_per_step: int
    run: ReplyRun


def case_key(family: str, message: str, tokens_per_step: int = 1, max_tokens: int = 4096,
             stop: tuple[str, ...] = (), thinking: bool = False) -> str:
    return json.dumps([family, message, tokens_per_step, max_tokens, list(stop), thinking], ensure_ascii=False)


def run_from_data(data: dict[str, Any]) -> ReplyRun:
    run = ReplyRun([step_from_data(s) for s in data["steps"]], data["output_tokens"], data.get("error"))
    return run.sum_up()


def reply_run(family: str, message: str, tokens_per_step: int = 1, max_tokens: int = 4096,
              stop: tuple[str, ...] = (), thinking: bool = False) -> ReplyRun:
    """The toy model's reply to ``message`` in tokenizer ``family``, as the server pushes it through lab-02."""
    key = case_key(family, message, tokens_per_step, max_tokens, stop, thinking)
    recorded = load(REPLIES_FILE)["runs"]
    if key not in recorded:
        raise LookupError(f"no recorded reply for {key}: {STALE_HINT}")
    return run_from_data(recorded[key])


def text_runs() -> list[TextRun]:
    """Reply texts with thoughts, prose and calls (quotes, braces, end tags in strings, CJK, emoji), each
    written by the model on the byte tokenizer and pushed through lab-02 at its step size."""
    return [TextRun(d["text"], d["tokens_per_step"], run_from_data(d["run"])) for d in load(REPLIES_FILE)["texts"]]


def reference_stream(api: str, family: str, message: str, tokens_per_step: int = 1, max_tokens: int = 4096,
                     stop: tuple[str, ...] = (), thinking: bool = False) -> list[dict[str, Any]]:
    """The reference lab-07 formatter's whole stream of events (``api``: responses or messages) for a reply."""
    key = f"{api} {case_key(family, message, tokens_per_step, max_tokens, stop, thinking)}"
    recorded = load(REPLIES_FILE)["streams"]
    if key not in recorded:
        raise LookupError(f"no recorded {api} stream for {key}: {STALE_HINT}")
    copy: list[dict[str, Any]] = json.loads(json.dumps(recorded[key]))  # a test may not change what the next reads
    return copy
