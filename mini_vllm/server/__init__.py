"""The HTTP server (FastAPI + uvicorn, as vLLM's ``api_server.py``).

A request reads top to bottom, and imports run the same way:

- ``app``: ``create_app`` composes the routes, the model cards, errors and the OpenAPI document;
- ``chat``, ``responses``, ``messages``: one module per protocol's routes (Chat Completions and
  Completions; OpenAI's Responses API; Anthropic's Messages API);
- ``runner``: what every route shares: prepare, admit, generate, collect or stream, abort on
  disconnect, SSE framing, the labs' exceptions as API errors (``bodies`` reads the request body,
  ``events`` holds what the two typed-event protocols share, ``structured`` lab-08's grammars);
- then ``mini_vllm.engine`` (token ids), lab-02's pipeline (text) and the protocol's formatter.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mini_vllm.server.app import create_app

__all__ = ["create_app"]


def __getattr__(name: str) -> Any:
    # create_app is imported on first use: a process spawned to run one part (the decode process, a compile
    # worker) imports this package first, and the app's routes and FastAPI would cost it 0.5 s of CPU for nothing.
    if name == "create_app":
        from mini_vllm.server.app import create_app

        return create_app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
