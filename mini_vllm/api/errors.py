"""Every error a client can meet, in its provider's error body, with the right status.

A client library decides what to do from the status and the body: the openai SDK retries a
503 but not a 400, and shows ``error.message`` to the user. So no error may escape as
Starlette's plain ``Internal Server Error`` or FastAPI's ``{"detail": ...}``: an unknown route
(404), a wrong method (405), a body that is not JSON, a field of the wrong type (pydantic's
validation error), a body over the size limit (413) and any exception nobody expected (500)
all come out as an :class:`ApiError`, in the body shape of the API the path belongs to.

The shape is chosen per path: OpenAI's by default, and ``app.state.error_shapes`` maps a path
prefix to another (``{"/v1/messages": anthropic_error_body}``). One :class:`ApiError` carries
what went wrong; each shape only decides how to spell it. The handlers that answer with them, and
the body-size guard, are the web framework's side: :mod:`mini_vllm.server.http_errors`. This module
imports no web framework, so a process spawned to decode or compile (which raises ``ApiError``) starts
without FastAPI.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

MAX_BODY_BYTES = 16 * 1024 * 1024  # 16 MiB: far more than any prompt the toy model's context holds


class ApiError(Exception):
    """A request the server refuses, or a failure it reports: status, message, the field at fault, a code."""

    def __init__(self, status: int, message: str, param: str | None = None, code: str | None = None,
                 type: str = "invalid_request_error", headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.param, self.code, self.type = status, message, param, code, type
        self.headers = headers

    def body(self) -> dict[str, Any]:
        """OpenAI's shape (also what an error event inside an OpenAI stream carries)."""
        return openai_error_body(self)


ErrorShape = Callable[[ApiError], dict[str, Any]]


def openai_error_body(error: ApiError) -> dict[str, Any]:
    return {"error": {"message": error.message, "type": error.type, "param": error.param, "code": error.code}}


# Anthropic's error types by status (docs.anthropic.com, "Errors"); anything else is an api_error.
ANTHROPIC_ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
                         404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error",
                         500: "api_error", 503: "overloaded_error", 529: "overloaded_error"}


def anthropic_error_body(error: ApiError) -> dict[str, Any]:
    """Anthropic's shape, for ``/v1/messages``: ``{"type": "error", "error": {"type", "message"}}``."""
    kind = ANTHROPIC_ERROR_TYPES.get(error.status, "invalid_request_error" if error.status < 500 else "api_error")
    return {"type": "error", "error": {"type": kind, "message": error.message}}


# ----------------------------------------------------------------- pydantic errors -> one ApiError


# Parts of pydantic's error locations that name a type or a union branch, not a field.
TYPE_LABELS = frozenset({"str", "int", "float", "bool", "none", "function-after", "function-before",
                         "function-wrap", "function-plain", "lax-or-strict", "json-or-python"})
UNION_TAGS = frozenset({"system", "developer", "user", "assistant", "tool"})


def param_path(location: Sequence[int | str]) -> str:
    """pydantic's error location as a client would name the field: ``messages[0].content[1].text``.

    pydantic puts labels among the fields: union branches (``str``, ``list[TextPart]``), validator
    names (``_item_type()``) and, right after an item's index, the tag of a discriminated union (a
    message's role; the type of an item or block, when the list's label says ``tagged-union``).
    """
    path, previous, tagged = "", None, False
    for part in location:
        if isinstance(part, int):
            path += f"[{part}]"
        elif isinstance(previous, int) and (tagged or part in UNION_TAGS):
            pass  # the item's tag: its role, or its type
        elif part in TYPE_LABELS or "[" in part or part[:1].isupper() or part.endswith("()"):
            tagged = "tagged-union" in part  # a union branch, a list's label, a validator
        else:
            path += ("." if path else "") + part
            tagged = False
        previous = part
    return path


def validation_error(errors: Sequence[Any]) -> ApiError:
    """The first problem pydantic found, as a 400 naming the field (FastAPI would say 422 ``{"detail": [...]}``)."""
    # Of a union's branches, the one that got furthest into the value says the most.
    first: dict[str, Any] = dict(max(errors, key=lambda e: len(dict(e).get("loc", ())))) if errors else {
        "loc": (), "msg": "invalid request", "type": "invalid"}
    context: dict[str, Any] = first.get("ctx") or {}
    location = [part for part in first.get("loc", ()) if part != "body"]
    kind = str(first.get("type", ""))
    if kind == "json_invalid":
        where = f" (at position {location[0]})" if location and isinstance(location[0], int) else ""
        return ApiError(400, f"the request body is not valid JSON: {context.get('error', first['msg'])}"
                        f"{where}", code="invalid_json")
    if not location and kind in ("model_attributes_type", "model_type", "dict_type"):
        hint = " (send it with Content-Type: application/json)" if isinstance(first.get("input"), bytes) else ""
        return ApiError(400, f"the request body must be a JSON object{hint}", code="invalid_json")
    param = param_path(location)
    if kind == "union_tag_invalid":  # a message whose role (an item or block whose type) is none of the known ones
        tag = str(context.get("discriminator", "'role'")).strip("'")
        tag = "type" if tag.endswith("()") else tag  # a validator that reads the type (the Responses API's items)
        param = f"{param}.{tag}" if param else tag
        message = (f"{param}: {context.get('tag')!r} is not one of the accepted values: "
                   f"{context.get('expected_tags', '')}")
        return ApiError(400, message, param=param, code="invalid_value")
    if kind == "extra_forbidden":
        message = f"unknown field {param!r}: this server does not support it (check the spelling)"
    elif kind == "missing":
        message = f"{param} is required"
    else:
        message = str(first.get("msg", "invalid value")).removeprefix("Value error, ")
        message = f"{param}: {message}" if param and not message.startswith(param) else message
    return ApiError(400, message, param=param or None, code="invalid_value" if kind != "extra_forbidden"
                    else "unknown_field")


# One encoder, made once: json.dumps with any option but the defaults builds a new encoder per call,
# which was a fifth of the cost of a chunk on the wire.
dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
"""JSON as it goes on the wire: UTF-8 text, not ``\\u`` escapes, no spaces."""
