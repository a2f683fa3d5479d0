"""Reading a request body: JSON parsed off the event loop, bounded, checked, as a typed model.

Every route reads its body here (never through FastAPI's own body parameter), so every
endpoint treats a body the same way: any ``Content-Type`` is read as JSON (as OpenAI does),
a lone surrogate anywhere in it is a 400 naming the field, and one request can cost only so
much before it is refused:

- big bodies (over ``BIG_BODY_BYTES``) are parsed one at a time, so eight 15 MB bodies never
  hold eight parsed copies at once;
- before a big body is parsed, its separators (``,`` and ``:``, an upper bound on the values and
  members it holds) are counted a slice at a time, and past ``MAX_JSON_SEPARATORS`` it is refused
  unparsed: a body of few objects but a huge array or map (``logit_bias`` with 900,000 keys) would
  otherwise hold the GIL in the C parser and in pydantic for a second or more;
- the parse counts JSON objects as it goes and stops at ``MAX_JSON_OBJECTS``, which bounds the
  work pydantic is given; no one object may hold more than ``MAX_OBJECT_MEMBERS`` members.
  Counting runs a little Python for every object, and that is also
  what keeps the parse from stalling other streams: the worker thread gives up the GIL between
  objects, where ``json.loads`` alone would hold it for the whole body.
"""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any, TypeVar

from fastapi import Request
from pydantic import BaseModel, ValidationError

from mini_vllm.api.errors import ApiError, validation_error

M = TypeVar("M", bound=BaseModel)

INLINE_BODY_BYTES = 4 * 1024  # smaller bodies are parsed, and their prompts tokenized, on the event loop: a
# millisecond at most, and two hops to a worker thread saved (measured in process: 0.91 against 0.99 ms a short
# request, medians of 6 x 200 on the loaded 2-core machine; a small gain, so the bound stays small)
BIG_BODY_BYTES = 256 * 1024  # bodies at least this big wait for their turn to be parsed (one at a time)
MAX_JSON_OBJECTS = 50_000  # JSON objects in one body: far more than 10,000 messages need, far less than 15 MB holds
MAX_JSON_SEPARATORS = 250_000  # ',' and ':' in one body (inside strings too): 10,000 messages need about 60,000
MAX_OBJECT_MEMBERS = 10_000  # members of one JSON object (logit_bias has its own, smaller, limit)
SCAN_SLICE = 64 * 1024  # the separator count reads this much at a time, so other threads get the GIL between

BODY_MODELS: dict[str, type[BaseModel]] = {}  # request models by name, for the OpenAPI document


def body_doc(model: type[BaseModel]) -> dict[str, Any]:
    """The ``openapi_extra`` of a route whose body :func:`read_body` reads: documents ``model`` as its body."""
    BODY_MODELS[model.__name__] = model
    return {"requestBody": {"required": True, "content": {"application/json": {
        "schema": {"$ref": f"#/components/schemas/{model.__name__}"}}}}}


def small_body(request: Request) -> bool:
    """Whether :func:`read_body` found the body small enough to do its work on the event loop."""
    return bool(getattr(request.state, "small_body", False))


def parse_gate(request: Request) -> asyncio.Semaphore:
    """The app's one-at-a-time gate for big bodies (made on first use, on the app's own event loop)."""
    state = request.app.state
    gate: asyncio.Semaphore | None = getattr(state, "big_body_gate", None)
    if gate is None:
        gate = state.big_body_gate = asyncio.Semaphore(1)
    return gate


async def read_body(request: Request, model: type[M]) -> M:
    """The request body as ``model``, parsed and validated in a worker thread, or an ApiError (400)."""
    raw = await request.body()
    request.state.small_body = len(raw) < INLINE_BODY_BYTES
    if request.state.small_body:
        return parse_body(raw, model)
    if len(raw) < BIG_BODY_BYTES:
        return await asyncio.to_thread(parse_body, raw, model)
    async with parse_gate(request):
        return await asyncio.to_thread(parse_body, raw, model)


class TooManyObjects(Exception):
    pass


def count_separators(raw: bytes) -> None:
    """A 400 when ``raw`` holds more ``,`` and ``:`` than :data:`MAX_JSON_SEPARATORS` (read a slice at a time)."""
    total = 0
    for start in range(0, len(raw), SCAN_SLICE):
        piece = raw[start:start + SCAN_SLICE]
        total += piece.count(b",") + piece.count(b":")
        if total > MAX_JSON_SEPARATORS:
            raise ApiError(400, f"the request body holds more than {MAX_JSON_SEPARATORS:,} JSON separators (',' and "
                           "':', a bound on the values and members it can hold), this server's limit for one request",
                           code="request_too_large")


def parse_body(raw: bytes, model: type[M]) -> M:
    objects = 0
    if len(raw) > SCAN_SLICE:
        count_separators(raw)

    def count(pairs: dict[str, Any]) -> dict[str, Any]:
        nonlocal objects
        objects += 1
        if objects > MAX_JSON_OBJECTS:
            raise TooManyObjects
        if len(pairs) > MAX_OBJECT_MEMBERS:
            raise ApiError(400, f"a JSON object in the request body has {len(pairs):,} members, over this server's "
                           f"limit of {MAX_OBJECT_MEMBERS:,} for one object", code="request_too_large")
        return pairs

    try:
        text = raw.decode("utf-8")  # strict: json.loads would let UTF-8-encoded surrogates (and UTF-16) through
        data = json.loads(text, object_hook=count)
    except TooManyObjects:
        raise ApiError(400, f"the request body holds more than {MAX_JSON_OBJECTS:,} JSON objects, this server's "
                       "limit for one request", code="request_too_large") from None
    except RecursionError:
        raise ApiError(400, "the request body is JSON nested too deeply to read", code="invalid_json") from None
    except UnicodeDecodeError as error:
        raise ApiError(400, f"the request body is not UTF-8 text (byte {error.start} cannot start or continue a "
                       "character): JSON on the wire must be UTF-8", code="invalid_json") from None
    except ValueError as error:  # JSONDecodeError
        raise ApiError(400, f"the request body is not valid JSON: {error}", code="invalid_json") from None
    if not isinstance(data, dict):
        raise ApiError(400, "the request body must be a JSON object", code="invalid_json")
    check_unicode_everywhere(text, data)
    try:
        return model.model_validate(data)
    except ValidationError as error:
        raise validation_error(error.errors()) from None


SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def check_unicode_everywhere(text: str, data: dict[str, Any]) -> None:
    """A 400 naming the first field whose key or value holds a lone surrogate (``"\\ud800"`` is valid JSON, but
    no character: it has no UTF-8, so it would fail later, on the way to the tokenizer or the wire).

    Strict UTF-8 text can carry a surrogate only as a ``\\uD800``-style escape, so a body without one is
    not walked at all (a C-speed scan of its text decides).
    """
    if SURROGATE_ESCAPE.search(text) is None:
        return
    path, position = find_surrogate(data, "")
    if position >= 0:  # (the escape may have been half of a valid pair: an emoji)
        raise ApiError(400, f"{path or 'the request body'} holds a lone surrogate at position {position}: that is "
                       "not a Unicode character, so it cannot be encoded as UTF-8", param=path or None,
                       code="invalid_unicode") from None


def find_surrogate(value: Any, path: str) -> tuple[str, int]:
    """The path of the first string (or key) in ``value`` that does not encode, and where in it."""
    if isinstance(value, str):
        return path, surrogate_at(value)
    if isinstance(value, dict):
        for key, item in value.items():
            where = f"{path}.{safe(key)}" if path else safe(key)
            if surrogate_at(key) >= 0:
                return where, surrogate_at(key)
            found = find_surrogate(item, where)
            if found[1] >= 0:
                return found
    if isinstance(value, list):
        for i, item in enumerate(value):
            found = find_surrogate(item, f"{path}[{i}]")
            if found[1] >= 0:
                return found
    return path, -1


def surrogate_at(text: str) -> int:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        return error.start
    return -1


def safe(key: str) -> str:
    """A key as it may appear in a message: a lone surrogate is written as its escape, never sent raw."""
    return key.encode("utf-8", "backslashreplace").decode("utf-8")
