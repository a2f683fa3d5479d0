"""Lab-02's reference OutputPipeline, played back from a recording: what task 3's formatter is fed.

Task 3 grades the ChunkFormatter alone, so its tests serve your formatter behind the reference
pipeline. The student's release has no reference to run, so the pipeline's outputs were
recorded per request (by the instructor) and :class:`ReplayPipeline` hands them back in order.
The toy model is deterministic, so the same request pushes the same ids step by step; a push
that differs from the recording (or a request never recorded) is an error, never a guess.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, is_dataclass
from typing import Any

from mini_vllm.testing.recorded import STALE_HINT, load, step_from_data, step_to_data

PIPELINE_FILE = "lab02_pipeline.json.gz"
# Set only by the instructor's recorder (instructor/pipeline_recording.py): called with the
# request's key and the constructor's arguments, it returns a live pipeline that records itself.
recorder: Callable[..., Any] | None = None


def request_key(tokenizer: Any, prompt_ids: Sequence[int], params: Any, parse_tool_calls: bool,
                parse_reasoning: bool, starts_in_reasoning: bool) -> str:
    knobs = asdict(params) if is_dataclass(params) and not isinstance(params, type) else vars(params)
    return json.dumps([type(tokenizer).__name__, tokenizer.vocab_size, list(prompt_ids), knobs,
                       parse_tool_calls, parse_reasoning, starts_in_reasoning], sort_keys=True, default=list)


def _ids(ids: int | Sequence[int]) -> list[int]:
    return [ids] if isinstance(ids, int) else list(ids)


def replay_pipeline(tokenizer: Any, prompt_ids: Sequence[int], params: Any, parse_tool_calls: bool = True,
                    parse_reasoning: bool = False, starts_in_reasoning: bool = False) -> Any:
    """Called as lab-02's ``OutputPipeline`` is: the recorded reference pipeline for this request."""
    key = request_key(tokenizer, prompt_ids, params, parse_tool_calls, parse_reasoning, starts_in_reasoning)
    if recorder is not None:
        return recorder(key, tokenizer, prompt_ids, params, parse_tool_calls=parse_tool_calls,
                        parse_reasoning=parse_reasoning, starts_in_reasoning=starts_in_reasoning)
    script = load(PIPELINE_FILE).get(key)
    if script is None:
        raise LookupError(f"no recorded lab-02 pipeline for this request ({key[:160]}…): {STALE_HINT}")
    return ReplayPipeline(script)


class ReplayPipeline:
    """OutputPipeline's ``push``, ``finish`` and ``stopped``, answered from one request's recording."""

    def __init__(self, script: list[dict[str, Any]]) -> None:
        self._script, self._next, self.stopped = script, 0, False

    def _play(self, call: str, argument: Any) -> Any:
        if self._next >= len(self._script):
            raise LookupError(f"the recording ends before this {call}({argument!r}): {STALE_HINT}")
        entry = self._script[self._next]
        self._next += 1
        if [entry["call"], entry["argument"]] != [call, argument]:
            raise LookupError(f"the recording has {entry['call']}({entry['argument']!r}) here, not "
                              f"{call}({argument!r}): {STALE_HINT}")
        if "error" in entry:  # the reference raised here (a malformed call): raise what it raised
            raise ValueError(entry["error"])
        self.stopped = entry["stopped"]
        return step_from_data(entry["output"])

    def push(self, ids: int | Sequence[int]) -> Any:
        return self._play("push", _ids(ids))

    def finish(self, reason: str) -> Any:
        return self._play("finish", reason)


class Recording:
    """A live pipeline that writes each call and what it answered into ``script`` (for the recorder)."""

    def __init__(self, pipeline: Any, script: list[dict[str, Any]]) -> None:
        self._pipeline, self._script = pipeline, script

    @property
    def stopped(self) -> bool:
        return bool(self._pipeline.stopped)

    def _record(self, call: str, argument: Any, run: Callable[[], Any]) -> Any:
        entry: dict[str, Any] = {"call": call, "argument": argument}
        self._script.append(entry)
        try:
            output = run()
        except ValueError as error:
            entry["error"] = str(error)
            raise
        entry["output"], entry["stopped"] = step_to_data(output), self.stopped
        return output

    def push(self, ids: int | Sequence[int]) -> Any:
        return self._record("push", _ids(ids), lambda: self._pipeline.push(ids))

    def finish(self, reason: str) -> Any:
        return self._record("finish", reason, lambda: self._pipeline.finish(reason))
