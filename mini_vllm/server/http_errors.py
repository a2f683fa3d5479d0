"""The web framework's side of :mod:`mini_vllm.api.errors`: every error of the app answered in its path's shape.

FastAPI's own answers (``{"detail": ...}``, a 422, Starlette's plain 500) never reach a client:
:func:`install_error_handling` routes :class:`~mini_vllm.api.errors.ApiError`, pydantic's validation
errors and Starlette's HTTP errors through the shape registered for the path, and
:class:`GuardMiddleware` refuses a body over the limit before any work and turns what nobody
handled into a 500 in that shape.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from mini_vllm.api.errors import MAX_BODY_BYTES, ApiError, ErrorShape, openai_error_body, validation_error

logger = logging.getLogger("mini_vllm.server")


def error_shape_for(app: Any, path: str) -> ErrorShape:
    """The shape registered for the longest prefix of ``path``; OpenAI's when none is."""
    shapes: dict[str, ErrorShape] = getattr(app.state, "error_shapes", {}) if app is not None else {}
    best = max((prefix for prefix in shapes if path.startswith(prefix)), key=len, default=None)
    return shapes[best] if best is not None else openai_error_body


def error_response(error: ApiError, shape: ErrorShape = openai_error_body) -> JSONResponse:
    return JSONResponse(shape(error), status_code=error.status, headers=error.headers)


def error_response_for(request: Request, error: ApiError) -> JSONResponse:
    return error_response(error, error_shape_for(request.app, request.url.path))


# The codes of the errors Starlette raises itself (OpenAI answers an unknown URL with "unknown_url").
HTTP_ERROR_CODES = {404: "unknown_url", 405: "method_not_allowed", 413: "request_too_large"}


def install_error_handling(app: FastAPI, max_body_bytes: int = MAX_BODY_BYTES,
                           shapes: dict[str, ErrorShape] | None = None) -> None:
    """Route every error of ``app`` through :func:`error_shape_for`; refuse bodies over ``max_body_bytes``.

    Call once, right after making the app. ``shapes`` adds path prefixes with their own body shape
    (also possible later: ``app.state.error_shapes[prefix] = shape``).
    """
    app.state.error_shapes = dict(shapes or {})

    @app.exception_handler(ApiError)
    async def api_error(request: Request, error: ApiError) -> JSONResponse:
        return error_response_for(request, error)

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, error: RequestValidationError) -> JSONResponse:
        return error_response_for(request, validation_error(error.errors()))

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, error: HTTPException) -> JSONResponse:
        code = HTTP_ERROR_CODES.get(error.status_code, "invalid_request")
        if error.status_code == 404:
            message = f"Invalid URL ({request.method} {request.url.path}): no such route"
        elif error.status_code == 405:
            message = f"Method {request.method} is not allowed for {request.url.path}"
        elif error.status_code == 413:
            message = str(error.detail)
        else:  # e.g. FastAPI's 400 for a body it could not parse at all (JSON nested too deep)
            message = f"the request body could not be read ({error.detail}): is it JSON nested too deeply?"
        kind = "invalid_request_error" if error.status_code < 500 else "server_error"
        return error_response_for(request, ApiError(error.status_code, message, code=code, type=kind,
                                                    headers=dict(error.headers or {}) or None))

    app.add_middleware(GuardMiddleware, max_body_bytes=max_body_bytes)


class BodyTooLarge(HTTPException):
    """Raised while the body is read; an HTTPException, so FastAPI's body reader lets it through."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, f"the request body is larger than the limit of {limit:,} bytes")


class GuardMiddleware:
    """Outermost guard of the app: a body-size limit checked before any work, and a last-resort 500.

    The body limit is checked on ``Content-Length`` at once, and again on the bytes actually
    received (a chunked body has no length). An exception nobody handled becomes a 500 in the
    path's error shape, and is not re-raised, so uvicorn keeps the connection open.
    """

    def __init__(self, app: ASGIApp, max_body_bytes: int = MAX_BODY_BYTES) -> None:
        self.app, self.max_body_bytes = app, max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        shape = error_shape_for(scope.get("app"), scope.get("path", ""))
        too_large = ApiError(413, f"the request body is larger than the limit of {self.max_body_bytes:,} bytes",
                             code="request_too_large")
        length = dict(scope.get("headers", [])).get(b"content-length")
        if length is not None and length.isdigit() and int(length) > self.max_body_bytes:
            await error_response(too_large, shape)(scope, receive, send)
            return
        received, started = 0, False

        async def counting_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_body_bytes:
                    raise BodyTooLarge(self.max_body_bytes)
            return message

        async def watching_send(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counting_receive, watching_send)
        except BodyTooLarge:
            if not started:
                await error_response(too_large, shape)(scope, receive, send)
        except ClientDisconnect:  # the client left before its body was all sent: nobody to answer, nothing wrong
            logger.info("client left mid-body on %s", scope.get("path"))
        except Exception as error:
            logger.exception("unhandled error on %s", scope.get("path"))
            if started:  # the status line is gone: nothing honest left to send
                raise
            failure = ApiError(500, f"internal error: {type(error).__name__}: {error}", type="server_error",
                               code="internal_error")
            await error_response(failure, shape)(scope, receive, send)
