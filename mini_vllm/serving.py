"""Building and running the server: the engine from a tokenizer name, uvicorn, and a background
server for tests, notebooks and benchmarks (a real server on a real 127.0.0.1 socket)."""

from __future__ import annotations

import socket
import threading
import time
from types import ModuleType, TracebackType

import uvicorn

from mini_vllm.api.errors import MAX_BODY_BYTES
from mini_vllm.demo import add_demo_routes
from mini_vllm.engine import MAX_MODEL_LEN, Engine
from mini_vllm.kv_pool import BlockPool
from mini_vllm.server import create_app
from mini_vllm.server.read_timeout import ReadTimeoutH11Protocol
from mini_vllm.server.templates import Prompts
from mini_vllm.tokenizers.families import load_tokenizer
from mini_vllm.toy_model import ToyModel

MODEL_NAME = "mini-vllm"


def build_engine(tokenizer: str = "bpe", token_delay_s: float = 0.0, seed: int = 0, tokens_per_step: int = 1,
                 max_model_len: int = MAX_MODEL_LEN) -> Engine:
    """The toy engine on the tokenizer of family ``tokenizer`` (a ``load_tokenizer`` name: "byte", "bpe", ...)."""
    return Engine(ToyModel(load_tokenizer(tokenizer), seed=seed), BlockPool(), token_delay_s=token_delay_s,
                  tokens_per_step=tokens_per_step, max_model_len=max_model_len)


def serve(host: str = "127.0.0.1", port: int = 8000, tokenizer: str = "bpe", token_delay_s: float = 0.0,
          reasoning: bool = True, reasoning_field: str = "reasoning", tokens_per_step: int = 1) -> None:
    """Run in the foreground until interrupted (``make serve``)."""
    app = create_app(build_engine(tokenizer, token_delay_s, tokens_per_step=tokens_per_step), MODEL_NAME,
                     reasoning=reasoning, reasoning_field=reasoning_field)
    add_demo_routes(app, model_name=MODEL_NAME, default_tokenizer=tokenizer)  # /demo: the page of `make demo`
    # SIGTERM: requests still running get 5 s, then the shutdown hook kills the grammar workers (a compile
    # would otherwise hold the graceful shutdown for up to its CPU limit).
    uvicorn.run(app, host=host, port=port, log_level="info", http=ReadTimeoutH11Protocol, timeout_graceful_shutdown=5)


class BackgroundServer:
    """The real server in a background thread, on a free 127.0.0.1 port; a context manager.

    >>> with BackgroundServer(build_engine("byte")) as server:
    ...     server.base_url  # e.g. http://127.0.0.1:40123/v1
    """

    def __init__(self, engine: Engine, pipeline: ModuleType | None = None, model_name: str = MODEL_NAME,
                 reasoning: bool = True, reasoning_field: str = "reasoning",
                 max_body_bytes: int = MAX_BODY_BYTES, prompts: Prompts = "lab-10") -> None:
        self.engine = engine
        self.model_name = model_name
        # IPPROTO_TCP spelled out: asyncio turns Nagle's algorithm off (TCP_NODELAY) only on
        # connections accepted from a socket whose proto says TCP. With proto 0, every response
        # waited ~40 ms for the client's delayed ACK, as uvicorn writes headers and body apart.
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._socket.bind(("127.0.0.1", 0))  # bound before uvicorn starts: no race for the port
        self.port = self._socket.getsockname()[1]
        app = create_app(engine, model_name, pipeline, reasoning=reasoning, reasoning_field=reasoning_field,
                         max_body_bytes=max_body_bytes, prompts=prompts)
        self.app = app
        add_demo_routes(app, pipeline, model_name)
        config = uvicorn.Config(app, log_level="warning", lifespan="off", http=ReadTimeoutH11Protocol)
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [self._socket]}, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def __enter__(self) -> BackgroundServer:
        self._thread.start()
        deadline = time.monotonic() + 20
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("the background server did not start")
            time.sleep(0.01)
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)
        self._socket.close()
        self.app.state.compile_pool.close()  # lifespan is off here: no shutdown hook kills the compile workers
