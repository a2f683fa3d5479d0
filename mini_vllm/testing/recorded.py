"""Recorded data: what the tests need from the reference solutions, kept as plain data.

The student's release has no ``solution.py``, yet lab-07 formats lab-02's output and lab-02's
task 3 formats what lab-02's pipeline says. So the instructor records those outputs from the
reference (with ``instructor/fixtures.py``, in the instructor's copy) into ``fixtures/`` here; the
tests read them the same way in both copies, and a test in the instructor's suite regenerates
them and fails when a solution changed and its recording did not.

The files are deterministic JSON (gzipped when large): same solutions, same bytes.
"""

from __future__ import annotations

import functools
import gzip
import json
from pathlib import Path
from typing import Any

FIXTURES_DIR = Path(__file__).parent / "fixtures"
STALE_HINT = ("the recorded data does not have it: the instructor adds the case in instructor/fixtures.py "
              "and records again")


def encode(data: Any, compress: bool) -> bytes:
    """The bytes of a fixture file: sorted keys, no spaces; gzip without a timestamp, so equal data is equal bytes."""
    text = json.dumps(data, sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    return gzip.compress(text, mtime=0) if compress else text + b"\n"


@functools.cache
def load(name: str) -> Any:
    """A fixture file's data, read once per process (``name`` ends in ``.json`` or ``.json.gz``)."""
    raw = (FIXTURES_DIR / name).read_bytes()
    return json.loads(gzip.decompress(raw) if name.endswith(".gz") else raw)


@functools.cache  # asked once per recorded step: the import machinery each time cost more than the step
def value_types() -> tuple[type, type, type]:
    """``(StepOutput, ToolCallDelta, ToolCall)``: the given value types lab-02 and lab-01 exchange."""
    from mini_vllm.labtypes.lab01 import ToolCall, ToolCallDelta
    from mini_vllm.labtypes.lab02 import StepOutput

    return StepOutput, ToolCallDelta, ToolCall


def step_to_data(step: Any) -> dict[str, Any]:
    """One StepOutput as plain data (fields at their defaults are left out)."""
    data: dict[str, Any] = {
        "text": step.text, "reasoning": step.reasoning,
        "deltas": [[d.index, d.name, d.arguments_fragment] for d in step.tool_call_deltas],
        "calls": [[c.name, c.arguments, c.arguments_text] for c in step.tool_calls],
        "finish_reason": step.finish_reason, "stop_reason": step.stop_reason,
    }
    return {key: value for key, value in data.items() if value not in ("", [], None)}


def step_from_data(data: dict[str, Any]) -> Any:
    step_output, delta, call = value_types()
    return step_output(text=data.get("text", ""), reasoning=data.get("reasoning", ""),
                       tool_call_deltas=[delta(*d) for d in data.get("deltas", [])],
                       tool_calls=[call(*c) for c in data.get("calls", [])],
                       finish_reason=data.get("finish_reason"), stop_reason=data.get("stop_reason"))
