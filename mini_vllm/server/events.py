"""What the two typed-event protocols share (``responses``, ``messages``): lab-07's formatter as a framing.

Both run lab-07's formatter over lab-02's pipeline through :func:`runner.generate`, and build a
non-streamed body from the very events a stream would carry (lab-07's ``build_response`` /
``build_message``), so the two can never disagree.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import orjson

from mini_vllm.api.errors import ApiError
from mini_vllm.server.runner import Step, not_implemented, pipeline_failed


class EventFraming:
    """lab-07's formatter as a :class:`Framing`: its events for each step, and its end.

    A malformed call (the pipeline raises ``ValueError``) ends the stream the API's way,
    ``formatter.fail`` (``response.failed`` / an ``error`` event); what was sent stays sent.
    """

    def __init__(self, formatter: Any, one_call: bool) -> None:
        self.formatter, self.one_call = formatter, one_call
        events = formatter.events
        self.step = (lambda out: events(first_call_only(out))) if one_call else events

    def start(self) -> Step:
        return list(self.formatter.start())

    def end(self, last: Any, completion_tokens: int) -> Step:
        return [*self.step(last), *self.formatter.finish(last.finish_reason, completion_tokens, last.stop_reason)]

    def fail(self, error: ValueError) -> Step | None:
        return list(self.formatter.fail(f"{type(error).__name__}: {error}"))


def first_call_only(out: Any) -> Any:
    """``parallel_tool_calls: false`` / ``disable_parallel_tool_use``: the calls after the first are not sent."""
    out.tool_call_deltas = [delta for delta in out.tool_call_deltas if delta.index == 0]
    return out  # (the formatters read the deltas only)


def whole_body(events: list[dict[str, Any]], build: Callable[[list[dict[str, Any]]], dict[str, Any]]) -> dict[str, Any]:
    """The non-streamed body lab-07's ``build`` makes from the events; a reply that failed is a 500."""
    failure = next((e for e in events if e.get("type") in ("response.failed", "error")), None)
    if failure is not None:
        detail = failure.get("response", {}).get("error") if failure["type"] == "response.failed" else \
            failure.get("error")
        raise ApiError(500, str((detail or {}).get("message", "the reply failed")), type="server_error",
                       code="invalid_model_output")
    return build(events)


def sse_event(event: dict[str, Any]) -> bytes:
    """One typed event: its type on the ``event:`` line, its JSON on ``data:`` (Responses and Messages)."""
    return b"event: " + str(event.get("type", "message")).encode() + b"\ndata: " + orjson.dumps(event) + b"\n\n"


def event_frames(error_event: Callable[[ApiError], dict[str, Any]]) -> Callable[[AsyncIterator[Step]],
                                                                                  AsyncIterator[bytes]]:
    """Typed event streams, a step's events together; a stub or a bug mid-stream becomes ``error_event``."""
    async def frames(steps: AsyncIterator[Step]) -> AsyncIterator[bytes]:
        try:
            async for events in steps:
                yield b"".join([sse_event(event) for event in events])
        except NotImplementedError as error:
            yield sse_event(error_event(not_implemented(error)))
        except Exception as error:
            yield sse_event(error_event(pipeline_failed(error)))
    return frames
