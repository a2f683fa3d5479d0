"""The app: every protocol's routes on one engine (FastAPI + uvicorn, as vLLM's api_server.py).

``create_app`` composes the routes (``chat``: Chat Completions and Completions; ``responses``;
``messages``), the model cards, the error handling of ``api_errors`` and the OpenAPI document.
What the user actually reads is made by the labs' code, loaded through the LAB_IMPL loader, so
``LAB_IMPL=starter`` serves the student's own code: lab-02's pipeline for every protocol, and
lab-07's event formatters for the two newer ones.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from mini_vllm.api.errors import MAX_BODY_BYTES, anthropic_error_body
from mini_vllm.api.protocol import check_model
from mini_vllm.api.response_bodies import ModelCard, ModelList, error_responses
from mini_vllm.engine import Engine
from mini_vllm.grammars.schema_regex import LIMITS
from mini_vllm.labs import load_lab
from mini_vllm.server.bodies import BODY_MODELS
from mini_vllm.server.chat import chat_router
from mini_vllm.server.compile_pool import CPU_SECONDS, MEMORY_BYTES, CompilePool
from mini_vllm.server.http_errors import install_error_handling
from mini_vllm.server.messages import messages_router
from mini_vllm.server.responses import responses_router
from mini_vllm.server.templates import Prompts, chat_lab

REASONING_FIELDS = ("reasoning", "reasoning_content")
DESCRIPTION = (
    "An OpenAI-compatible server for a toy model.\n\n"
    "**Structured outputs** (`response_format` / `text.format` `json_schema`, forced tool calls): OpenAI strict "
    "mode's schemas are served exactly or refused with a 400 naming the keyword. Limits, checked before any work: "
    f"{LIMITS['depth']} levels of nesting, {LIMITS['properties']} properties, {LIMITS['enum']} enum/const values, "
    f"{LIMITS['enum_chars']:,} characters of property names and enum/const values, `maxLength` up to "
    f"{LIMITS['maxLength']}, `maxItems` up to {LIMITS['maxItems']}, {LIMITS['anyOf']} branches per `anyOf`, and an "
    f"automaton of at most about {LIMITS['grammar_states']:,} states (estimated from the schema). A recursive `$ref` "
    "(to `#`, or to a `$defs` entry that refers back), `json_object` (any JSON object, nested) and a schema past "
    "that estimate are served by a grammar with a stack (lab-09) of at most "
    f"{LIMITS['grammar_symbols']:,} rules and lexemes, under the other limits. "
    f"A compile runs in a worker process under {CPU_SECONDS} s of CPU time and {MEMORY_BYTES // 1024**3} GiB of "
    "memory; past either, a 400. Not served: `pattern`, `format`, `oneOf`, `allOf`, `not`, number bounds with a "
    "fraction, a schema no finite value satisfies."
)


def create_app(engine: Engine, model_name: str = "mini-vllm", pipeline: ModuleType | None = None,
               reasoning: bool = True, reasoning_field: str = "reasoning",
               max_body_bytes: int = MAX_BODY_BYTES, events: ModuleType | None = None,
               prompts: Prompts = "lab-10") -> FastAPI:
    """The app. ``pipeline`` is the module with ``OutputPipeline`` and ``ChunkFormatter`` (default: lab-02);
    ``events`` the one with lab-07's formatters (default: lab-07, loaded on the first request that needs it).

    ``prompts``: how a chat's messages become the prompt's ids: ``"lab-10"`` (lab-10's ``render``, as ``LAB_IMPL``
    picks it; while it is a stub, the text prompt) or ``"text"`` (the ChatML text prompt, encoded with special
    matching: for the tests of a lab that must not depend on lab-10's file, lab-02's).
    ``reasoning``: split a chat reply's ``<think>`` thought into its own channel (lab-06).
    ``reasoning_field``: its name on the wire: ``reasoning`` (vLLM today) or
    ``reasoning_content`` (DeepSeek's API, older vLLM).
    """
    if reasoning_field not in REASONING_FIELDS:
        raise ValueError(f"reasoning_field must be one of {REASONING_FIELDS}, got {reasoning_field!r}")
    lab = pipeline or load_lab("lab-02")
    engine.max_token_bytes  # noqa: B018  read every token's bytes now, at start-up, not in the first request
    if prompts == "lab-10":
        chat_lab(engine.tokenizer)  # lab-10 renders chat prompts; a stub is said once, now
    app = FastAPI(title="mini_vllm", version="0.1.0", description=DESCRIPTION)
    install_error_handling(app, max_body_bytes, shapes={"/v1/messages": anthropic_error_body})
    app.state.engine = engine
    app.state.prompts = prompts
    app.state.compile_pool = pool = CompilePool()
    app.router.on_shutdown.append(pool.close)  # the grammar compiles' workers die with the server (SIGTERM)
    card = ModelCard(id=model_name, object="model", created=0, owned_by="mini_vllm",
                     max_model_len=engine.max_model_len)

    def labs() -> tuple[ModuleType, ModuleType]:
        return lab, events or load_lab("lab-07")

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/v1/models", response_model=ModelList)
    async def models() -> ModelList:
        return ModelList(object="list", data=[card])

    @app.get("/v1/models/{model_id:path}", response_model=ModelCard, responses=error_responses(404))
    async def model(model_id: str) -> ModelCard:
        check_model(model_id, model_name)
        return card

    @app.get("/debug/kv", include_in_schema=False)
    async def kv() -> dict[str, Any]:
        """Not OpenAI: lets a test watch an aborted request give its KV blocks back."""
        return {"free_blocks": engine.pool.num_free_blocks, "total_blocks": engine.pool.num_blocks,
                "running": sorted(engine.running), "waiting": engine.num_waiting,
                "aborted": list(engine.stats.aborted)[-50:]}

    app.include_router(chat_router(engine, model_name, lab, reasoning, reasoning_field))
    app.include_router(responses_router(engine, model_name, labs))
    app.include_router(messages_router(engine, model_name, labs))
    app.openapi = lambda: openapi_without_422(app)  # type: ignore[method-assign]
    return app


def openapi_without_422(app: FastAPI) -> dict[str, Any]:
    """The OpenAPI document, with the request models the routes read themselves (``bodies.body_doc``).

    FastAPI documents a 422 ``{"detail": [...]}`` on every route with parameters; this server
    answers those with a 400 in the provider's shape (as OpenAI does), so the document drops it.
    """
    if app.openapi_schema is None:
        document = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes)
        schemas = document.setdefault("components", {}).setdefault("schemas", {})
        for model in BODY_MODELS.values():
            schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
            schemas.update(schema.pop("$defs", {}))
            schemas[model.__name__] = schema
        for operations in document.get("paths", {}).values():
            for operation in operations.values():
                operation.get("responses", {}).pop("422", None)
        for unused in ("HTTPValidationError", "ValidationError"):
            schemas.pop(unused, None)
        app.openapi_schema = document
    return app.openapi_schema
