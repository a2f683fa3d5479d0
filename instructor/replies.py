"""Lab-02's reference pipeline run live, the way the server runs it: what ``make fixtures`` records.

The tests read the recordings (:mod:`mini_vllm.testing.replies`); this module makes them, and
serves the instructor's own server tests, which may ask for any reply.
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Iterator

from mini_vllm.labs import load_lab
from mini_vllm.sampling import SamplingParams
from mini_vllm.testing.replies import CHATML_USER, ReplyRun
from mini_vllm.tokenizers.base import Tokenizer, encode_continuation
from mini_vllm.tokenizers.families import load_tokenizer
from mini_vllm.toy_model import ToyModel

COMPOSED_LABS = ("01", "03", "04", "05", "06")


@contextlib.contextmanager
def reference_labs() -> Iterator[None]:
    """Inside: ``load_lab`` picks every composed lab's reference solution (lab-02 picks its parts at construction)."""
    saved = {lab: os.environ.get(f"LAB_IMPL_{lab}") for lab in COMPOSED_LABS}
    os.environ.update({f"LAB_IMPL_{lab}": "solution" for lab in COMPOSED_LABS})
    try:
        yield
    finally:
        for lab, value in saved.items():
            if value is None:
                os.environ.pop(f"LAB_IMPL_{lab}", None)
            else:
                os.environ[f"LAB_IMPL_{lab}"] = value


@functools.cache
def reply_run(family: str, message: str, tokens_per_step: int = 1, max_tokens: int = 4096,
              stop: tuple[str, ...] = (), thinking: bool = False) -> ReplyRun:
    """The toy model's reply to ``message``, as the server would push it through lab-02 (cached)."""
    tokenizer = load_tokenizer(family)
    prompt_ids = tokenizer.encode(CHATML_USER.format(message) + ("<think>\n" if thinking else ""))
    reply = ToyModel(tokenizer).reply_ids(message, prompt_ids)
    return run_ids(tokenizer, prompt_ids, reply, tokens_per_step, max_tokens, stop, thinking)


def text_run(family: str, text: str, tokens_per_step: int = 1) -> ReplyRun:
    """Any reply text (a hypothesis draw, say) written by the model, then EOS, through lab-02."""
    tokenizer = load_tokenizer(family)
    prompt_ids = tokenizer.encode(CHATML_USER.format("hi"))
    reply = [*encode_continuation(tokenizer, text), tokenizer.eos_token_id]
    return run_ids(tokenizer, prompt_ids, reply, tokens_per_step)


def run_ids(tokenizer: Tokenizer, prompt_ids: list[int], reply: list[int], tokens_per_step: int = 1,
            max_tokens: int = 4096, stop: tuple[str, ...] = (), thinking: bool = False) -> ReplyRun:
    """Reply ids through lab-02's reference pipeline, grouped as the engine groups them, ended as the server ends."""
    engine_reason = "stop"
    if len(reply) > max_tokens:
        reply, engine_reason = reply[:max_tokens], "length"
    groups = [reply[i : i + tokens_per_step] for i in range(0, len(reply), tokens_per_step)]
    with reference_labs():
        lab = load_lab("lab-02", "solution")
        pipeline = lab.OutputPipeline(tokenizer, prompt_ids, SamplingParams(max_tokens=max_tokens, stop=stop),
                                      parse_tool_calls=True, parse_reasoning=True, starts_in_reasoning=thinking)
    run = ReplyRun([], 0)
    reason = "stop"
    try:
        for number, group in enumerate(groups, start=1):
            run.output_tokens += len(group)
            run.steps.append(pipeline.push(group))
            if pipeline.stopped:
                break
            reason = engine_reason if number == len(groups) else reason
        run.steps.append(pipeline.finish(reason))
    except ValueError as error:  # a malformed call: lab-01's ToolCallParseError
        run.error = f"{type(error).__name__}: {error}"
    return run.sum_up()
