"""The request runner every protocol's routes share: read, prepare, admit, generate, collect or stream.

A route (``chat``, ``responses``, ``messages``) reads its body with :func:`read_body`, turns it
into a :class:`Generation` with :func:`prepare`, takes KV blocks with :func:`admit`, and hands
:func:`generate` the lab-02 pipeline and a :class:`Framing` (its protocol's chunks or events).
:func:`respond` then streams the framed steps as server-sent events or collects them into one
body, aborting the engine request when the client leaves. Errors raised by the labs' code
become API errors here (:func:`lab_errors_as_api_errors`), in one place for every protocol.

This module imports nothing from the routes or the app: imports run app -> routes -> runner.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, Protocol, TypeVar

import orjson
from fastapi import Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from pydantic import BaseModel

from mini_vllm.api.errors import ApiError, dumps
from mini_vllm.api.protocol import GenerationRequest, context_exceeded
from mini_vllm.engine import Engine
from mini_vllm.kv_pool import NoFreeBlocks
from mini_vllm.server.bodies import read_body
from mini_vllm.server.compile_pool import CompilePool
from mini_vllm.server.structured import grammar_for
from mini_vllm.server.templates import rendered_ids

__all__ = ["Framing", "Generation", "admit", "generate", "lab_errors_as_api_errors", "prepare", "read_body",
           "respond", "sse"]

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)
Step = list[dict[str, Any]]  # what one engine step becomes on the wire: chunks or events, written together


# ----------------------------------------------------------------- the labs' exceptions as API errors


def not_implemented(error: NotImplementedError) -> ApiError:
    """A stub in the student's code: say which task, as a 501 the tests turn back into the error."""
    return ApiError(501, f"NotImplementedError: {error}", type="not_implemented", code="not_implemented")


def pipeline_failed(error: Exception) -> ApiError:
    """The labs' code raised (a malformed tool call, say): an API error, never a silently shortened reply."""
    code = "invalid_model_output" if isinstance(error, ValueError) else "internal_error"
    return ApiError(500, f"{type(error).__name__}: {error}", type="server_error", code=code)


@contextlib.contextmanager
def lab_errors_as_api_errors() -> Iterator[None]:
    """Around code that runs the labs: a stub becomes the 501 naming its task, any other failure a 500
    in the API's error shape; an ApiError passes as it is."""
    try:
        yield
    except NotImplementedError as error:
        raise not_implemented(error) from None
    except ApiError:
        raise
    except Exception as error:
        raise pipeline_failed(error) from error


# ----------------------------------------------------------------- prepare and admit


@dataclass(frozen=True)
class Generation:
    """A request ready for the engine: its id, the prompt's token ids, the engine's parameters."""

    request: GenerationRequest
    request_id: str
    prompt_ids: list[int]
    params: Any  # SamplingParams
    grammar: Any = None  # the request's constraint compiled by lab-08 (mini_vllm.server.structured), if any


async def prepare(engine: Engine, build: Callable[[], GenerationRequest], prefix: str = "",
                  inline: bool = False, request: Request | None = None) -> Generation:
    """Build the prompt and tokenize it in a worker thread, then fix the parameters to the context left.

    Tokenizing a long prompt is pure Python: on the event loop, one 10 MB prompt would freeze
    every other stream (and /health) until it was done. In a thread, the loop keeps its turns.
    ``inline``: the body was small (``bodies.small_body``), so the work is too: skip the thread's hop.
    A constraint is compiled in the app's compile pool (a worker process); if the client leaves
    while it waits, it stops waiting (and the compile stops, if nobody else waits for it).
    """
    def work() -> tuple[GenerationRequest, list[int]]:
        req = build()
        check_size(engine, req.prompt, req.prompt_field)
        with lab_errors_as_api_errors():
            # a chat's messages, by lab-10: never a string encoded whole
            ids = rendered_ids(engine.tokenizer, req, getattr(request.app.state, "prompts", "lab-10") if request
                               is not None else "lab-10")
        return req, ids if ids is not None else encode_prompt(engine, req.prompt, req.prompt_field)

    req, prompt_ids = work() if inline else await asyncio.to_thread(work)
    grammar = None
    if req.constraint is not None:  # an index over the whole vocabulary: in a worker process, never on the loop
        pool = compile_pool(request)
        with lab_errors_as_api_errors():
            compiling = grammar_for(engine, req.constraint, pool)
            grammar = await (cancel_on_disconnect(request, compiling) if request is not None else compiling)
        if grammar is None:
            raise ClientLeft("the client closed the connection while its grammar compiled")
    params = req.sampling_params(len(prompt_ids), engine.capacity_tokens)
    prefix = prefix or ("chatcmpl" if req.kind == "chat" else "cmpl")
    return Generation(req, f"{prefix}-{uuid.uuid4().hex[:24]}", prompt_ids, params, grammar)


_default_pool: CompilePool | None = None


def compile_pool(request: Request | None) -> CompilePool:
    """The app's compile pool (``create_app`` makes it and kills its workers at shutdown), or one for tests."""
    global _default_pool
    pool = getattr(request.app.state, "compile_pool", None) if request is not None else None
    if pool is None:
        if _default_pool is None:
            _default_pool = CompilePool()
        pool = _default_pool
    return pool


def check_size(engine: Engine, prompt: str, field: str = "messages") -> None:
    """A 400 at once when even the fewest tokens the prompt's text could make exceed the context."""
    size = len(prompt.encode("utf-8"))
    limit = engine.capacity_tokens
    if size > limit * engine.max_token_bytes:  # cheap: no need to tokenize to know it is too long
        raise context_exceeded(-(-size // engine.max_token_bytes), limit, at_least=True, param=field)


def encode_prompt(engine: Engine, prompt: str, field: str = "messages") -> list[int]:
    """A raw prompt's ids (``/v1/completions``, or a chat while lab-10 is a stub): special strings in it are matched,
    so its client writes its own control tokens."""
    check_size(engine, prompt, field)
    return engine.tokenizer.encode(prompt)


MAX_WAITING = 1024  # requests waiting for KV blocks at once; past this the server answers 503 (overloaded)


class ClientLeft(ApiError):
    """The client hung up before its request was admitted: nobody reads the answer (nginx's 499)."""

    def __init__(self, message: str = "the client closed the connection while its request waited for KV cache "
                 "blocks") -> None:
        super().__init__(499, message, code="client_closed_request")


async def admit(request: Request, engine: Engine, generation: Generation) -> None:
    """Reserve the KV blocks the whole request may need (its prompt and ``max_tokens``), waiting in line
    while the pool is busy, so that no other request can ever cut it short.

    A request bigger than the pool can ever hold is a 400 (``prepare`` already bounds it by
    ``engine.capacity_tokens``; this is the guard). A 503 only when the line itself is full.
    Raises :class:`ClientLeft` if the client hangs up while it waits.
    """
    prompt, max_tokens = len(generation.prompt_ids), generation.params.max_tokens
    if prompt + max_tokens > engine.capacity_tokens:
        raise context_exceeded(prompt, engine.capacity_tokens, max_tokens, param=generation.request.max_tokens_field)
    if not engine.num_waiting:  # nobody in line: take the blocks now if they are free
        try:
            engine.admit(generation.request_id, prompt, max_tokens)
            return
        except NoFreeBlocks:
            pass
    compiling = compile_pool(request).waiting  # requests before their compile count too
    if engine.num_waiting + compiling >= MAX_WAITING:
        raise ApiError(503, f"the server is overloaded: {engine.num_waiting} requests are waiting for KV cache "
                       f"blocks already ({compiling} more for a grammar); retry later", type="server_error",
                       code="overloaded")
    waited = await cancel_on_disconnect(request, wait_in_line(engine, generation))
    if waited is None:
        raise ClientLeft


async def wait_in_line(engine: Engine, generation: Generation) -> bool:
    await engine.wait_to_admit(generation.request_id, len(generation.prompt_ids), generation.params.max_tokens)
    return True


# ----------------------------------------------------------------- generate


class Framing(Protocol):
    """What a protocol makes of the pipeline's outputs: a list of chunks or events per engine step."""

    def start(self) -> Step: ...

    def step(self, out: Any) -> Step: ...

    def end(self, last: Any, completion_tokens: int) -> Step: ...

    def fail(self, error: ValueError) -> Step | None:
        """The pipeline found the reply malformed: the events that end the stream, or None to raise."""


async def generate(engine: Engine, generation: Generation, output: Any, framing: Framing) -> AsyncIterator[Step]:
    """Engine token ids -> lab-02's pipeline (``output``) -> the protocol's framing, a list per engine step.

    The request is aborted however this ends early (a stop string, a disconnect, an error).
    """
    req, request_id = generation.request, generation.request_id
    completion_tokens, engine_reason = 0, "stop"
    push, step = output.push, framing.step  # looked up once: this loop runs for every token
    choose = None
    try:
        first = framing.start()
        if first:
            yield first
        try:
            choose = None if generation.grammar is None else \
                generation.grammar.chooser(engine, req.user_message, req.enable_thinking)
            async for out in engine.generate(request_id, generation.prompt_ids, req.user_message, generation.params,
                                             choose):
                completion_tokens += len(out.token_ids)
                framed = step(push(out.token_ids[0] if len(out.token_ids) == 1 else list(out.token_ids)))
                if framed:
                    yield framed
                if output.stopped:  # a stop string: the reply is over, stop spending compute on it
                    break
                engine_reason = out.finish_reason or engine_reason
            last = finish(output, engine_reason)
            if generation.grammar is not None and generation.grammar.tool_call and last.finish_reason == "length":
                # A forced call is the whole reply: cut before its name, the pipeline would show the tag it
                # held back (``<tool_ca``) as text. Under a grammar that text is the call's, never content.
                last.text = ""
        except ValueError as error:
            failed = framing.fail(error)
            if failed is None:
                raise
            yield failed
            return
        yield framing.end(last, completion_tokens)
    finally:
        engine.abort(request_id)  # no-op when it finished; frees the blocks after a stop string or a disconnect
        if choose is not None:
            choose.close()  # the reply's session in the decode process


def finish(output: Any, engine_reason: str) -> Any:
    """The pipeline's last output. The one rule the shell adds: a stop string may fall inside a tool call.

    The stop wins, as in vLLM, whose stop check sees the model's text before any parser:
    the reply ends there. The call it cut is left as far as it was sent (its name and the
    argument fragments before the stop), and the reply finishes with "stop", not an error:
    the client asked for the cut. (The pipeline reports the cut call as malformed, so its
    stop_reason is lost; the shell sends ``stop_reason: null`` then.)
    """
    try:
        return output.finish(engine_reason)
    except ValueError:
        if not output.stopped:
            raise
        return SimpleNamespace(text="", reasoning="", tool_calls=[], tool_call_deltas=[], finish_reason="stop",
                               stop_reason=None)


# ----------------------------------------------------------------- respond: stream, or collect into one body


async def respond(request: Request, steps: AsyncIterator[Step], stream: bool,
                  frames: Callable[[AsyncIterator[Step]], AsyncIterator[bytes]],
                  build: Callable[[list[dict[str, Any]]], dict[str, Any]]) -> Response:
    """Stream ``steps`` as server-sent events (``frames``), or collect them and answer ``build``'s body."""
    if stream:
        return StreamingResponse(frames(steps), media_type="text/event-stream")
    with lab_errors_as_api_errors():
        collected = await cancel_on_disconnect(request, collect(steps))
        if collected is None:  # the client left: nobody reads this, the request is already aborted
            return Response(status_code=499)
        return JSONResponse(build(collected))


async def collect(steps: AsyncIterator[list[T]]) -> list[T]:
    return [item async for items in steps for item in items]


async def wait_for_disconnect(request: Request) -> None:
    """Return when the client hangs up. The body is already read, so the next message is the disconnect."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


async def cancel_on_disconnect(request: Request, work: Awaitable[T]) -> T | None:
    """Run ``work`` unless the client leaves first; then cancel it (its ``finally`` aborts the engine request).

    A streamed response notices a disconnect when a write fails; a whole response writes
    nothing until the end, so it has to listen for the disconnect (vLLM's ``with_cancellation``).
    """
    task = asyncio.ensure_future(work)
    watcher = asyncio.ensure_future(wait_for_disconnect(request))
    try:
        await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        watcher.cancel()
    if task.done():
        return task.result()
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    return None


# ----------------------------------------------------------------- SSE framing


def sse(payload: dict[str, Any]) -> str:
    """One ``data:`` event (the demo's feed, an in-band error)."""
    return f"data: {dumps(payload)}\n\n"


async def data_frames(steps: AsyncIterator[Step]) -> AsyncIterator[bytes]:
    """OpenAI's chunk streams: each step's chunks as ``data:`` events written together, then ``[DONE]``.

    orjson, not the standard library: serialising the chunk was the largest single cost of a
    token on the wire (about 8 µs of the stdlib's against under 1 µs), and it hands back the
    UTF-8 bytes the socket wants. Every string in a chunk is valid Unicode (decoded text, and
    request strings checked by ``bodies``), which orjson insists on.
    """
    try:
        async for chunks in steps:
            yield b"".join([b"data: " + orjson.dumps(chunk) + b"\n\n" for chunk in chunks])
    except NotImplementedError as error:  # a stub reached mid-stream: report it in-band, as OpenAI does
        yield sse(not_implemented(error).body()).encode()
    except ApiError as error:  # the decode process's memory limit, say: its own status and message, in-band
        yield sse(error.body()).encode()
    except Exception as error:
        yield sse(pipeline_failed(error).body()).encode()
    yield b"data: [DONE]\n\n"
