"""The server shell and the engine kit: request checks, error bodies, models, the CLI, blocks, abort.

These run against the reference pipeline: the shell is mini_vllm's job, not a lab's.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor

import httpx
import openai
import pytest

from mini_vllm.engine import Engine
from mini_vllm.kv_pool import BlockPool, NoFreeBlocks
from mini_vllm.labs import load_lab
from mini_vllm.sampling import InvalidRequest, SamplingParams
from mini_vllm.serving import MODEL_NAME, BackgroundServer, build_engine
from mini_vllm.toy_model import ToyModel
from mini_vllm.toy_scripts import SCRIPTS, script_for

SOLUTION = load_lab("lab-02", "solution")


@pytest.fixture(scope="module")
def server() -> Iterator[BackgroundServer]:
    with BackgroundServer(build_engine("bpe"), pipeline=SOLUTION) as running:
        yield running


def client(server: BackgroundServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url, api_key="not-needed", max_retries=0, timeout=30)


def test_health_and_models(server: BackgroundServer) -> None:
    assert httpx.get(server.base_url.removesuffix("/v1") + "/health").json() == {"status": "ok"}
    assert [m.id for m in client(server).models.list()] == [MODEL_NAME]


@pytest.mark.parametrize(("options", "param", "words"), [
    ({"messages": []}, "messages", "non-empty"),
    ({"max_tokens": 0}, "max_tokens", "greater than or equal to 1"),
    ({"stop": ["ok", ""]}, "stop", "empty"),
    ({"n": 2}, "n", "n=1"),
    ({"messages": [{"role": "wizard", "content": "hi"}]}, "messages[0].role", "role"),
], ids=["no-messages", "max-tokens-0", "empty-stop", "n-2", "bad-role"])
def test_bad_requests_get_400_with_openai_error_bodies(server: BackgroundServer, options: dict[str, object],
                                                       param: str, words: str) -> None:
    request = {"model": MODEL_NAME, "messages": [{"role": "user", "content": "hi"}], **options}
    with pytest.raises(openai.BadRequestError) as raised:
        client(server).chat.completions.create(**request)  # type: ignore[call-overload]
    error = raised.value.body
    assert isinstance(error, dict) and error["param"] == param and words in error["message"], error
    assert error["type"] == "invalid_request_error"


def test_body_that_is_not_json_gets_400(server: BackgroundServer) -> None:
    response = httpx.post(server.base_url + "/chat/completions", content=b'{"model": "mini-vllm", "messages": [',
                          headers={"content-type": "application/json"})
    assert response.status_code == 400
    assert set(response.json()["error"]) == {"message", "type", "param", "code"}
    assert "not valid JSON" in response.json()["error"]["message"]


def test_unknown_model_gets_404(server: BackgroundServer) -> None:
    with pytest.raises(openai.NotFoundError) as raised:
        client(server).chat.completions.create(model="gpt-9", messages=[{"role": "user", "content": "hi"}])
    assert "gpt-9" in str(raised.value)


def test_cli_serves_on_127_0_0_1(tmp_path: object) -> None:
    with BackgroundServer(build_engine("byte")) as probe:  # borrow a free port, then release it
        port = probe.port
    env = {**os.environ, "LAB_IMPL": "solution"}
    process = subprocess.Popen([sys.executable, "-m", "mini_vllm", "serve", "--port", str(port), "--tokenizer", "byte",
                                "--tokens-per-step", "3"],
                               env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                assert httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).json() == {"status": "ok"}
                break
            except (httpx.TransportError, AssertionError):
                assert time.monotonic() < deadline and process.poll() is None, "the CLI server did not come up"
                time.sleep(0.1)
    finally:
        process.terminate()
        process.wait(timeout=10)


# --------------------------------------------------------------------------- engine kit


@pytest.mark.parametrize("bad", [{"max_tokens": 0}, {"max_tokens": True}, {"n": 3}, {"stop": ("",)},
                                 {"stop": (3,)}, {"skip_special_tokens": "yes"}], ids=repr)
def test_sampling_params_refuse_bad_values(bad: dict[str, object]) -> None:
    with pytest.raises(InvalidRequest) as raised:
        SamplingParams(**bad)  # type: ignore[arg-type]
    assert raised.value.param == next(iter(bad))


def test_block_pool_accounting() -> None:
    pool = BlockPool(num_blocks=4, block_size=16)
    pool.reserve("a", 17)
    assert (pool.blocks_held("a"), pool.num_free_blocks) == (2, 2)
    pool.reserve("a", 20)  # still fits in two blocks
    assert pool.num_free_blocks == 2
    with pytest.raises(NoFreeBlocks):
        pool.reserve("b", 48)
    assert pool.free("a") == 2 and pool.num_free_blocks == 4


def test_engine_streams_the_script_and_frees_blocks_when_done() -> None:
    engine = build_engine("byte")

    async def run() -> list[int]:
        return [i async for out in engine.generate("r1", [1, 2, 3], "emoji", SamplingParams()) for i in out.token_ids]

    ids = asyncio.run(run())
    assert engine.tokenizer.decode(ids, skip_special_tokens=True) == script_for("emoji")
    assert engine.pool.num_free_blocks == engine.pool.num_blocks and list(engine.stats.finished) == ["r1"]


@pytest.mark.parametrize("k", [1, 3, 8])
def test_engine_emits_k_tokens_per_step(k: int) -> None:
    engine = build_engine("byte", tokens_per_step=k)

    async def run() -> list[tuple[int, ...]]:
        return [out.token_ids async for out in engine.generate("r1", [1], "emoji", SamplingParams(max_tokens=1000))]

    steps = asyncio.run(run())
    assert all(len(step) == k for step in steps[:-1]) and 1 <= len(steps[-1]) <= k
    ids = [i for step in steps for i in step]
    assert ids == engine.model.reply_ids("emoji"), "grouping must not change the ids or their order"


def test_tokens_per_step_must_be_positive() -> None:
    with pytest.raises(ValueError, match="tokens_per_step"):
        build_engine("byte", tokens_per_step=0)


def test_engine_abort_frees_blocks_at_once() -> None:
    engine = Engine(ToyModel(build_engine("byte").tokenizer), BlockPool(num_blocks=64))  # 1,024 tokens

    async def run() -> None:
        stream = engine.generate("r1", list(range(40)), "long", SamplingParams(max_tokens=1000))
        async for out in stream:
            if out.token_ids and engine.pool.num_free_blocks < 64 - 3:
                break
        assert engine.running == {"r1"}
        engine.abort("r1")
        await stream.aclose()

    asyncio.run(run())
    assert engine.pool.num_free_blocks == 64 and list(engine.stats.aborted) == ["r1"] and not engine.running


def test_toy_model_scripts_are_chosen_by_keyword_and_deterministic() -> None:
    assert script_for("please, japanese") == SCRIPTS["japanese"]
    assert script_for("what's the weather?") == SCRIPTS["weather"]
    assert script_for("hi", seed=1) == script_for("hi", seed=1)


def test_a_full_kv_cache_makes_a_request_wait_never_cuts_one_short() -> None:
    """Admission reserves the prompt and max_tokens: a request that cannot get them now waits its turn
    (first come, first served) and then runs to its own max_tokens; one that never could is a 400."""
    engine = Engine(ToyModel(build_engine("byte").tokenizer), BlockPool(num_blocks=8, block_size=16),  # 128 tokens
                    token_delay_s=0.005)
    request = {"model": MODEL_NAME, "messages": [{"role": "user", "content": "long"}], "max_tokens": 60}
    with BackgroundServer(engine, pipeline=SOLUTION) as running:
        with pytest.raises(openai.BadRequestError) as never:  # more than the whole cache: retrying is futile
            client(running).chat.completions.create(**{**request, "max_tokens": 10_000})
        assert never.value.code == "context_length_exceeded", never.value.body
        with ThreadPoolExecutor(2) as pool:
            first = pool.submit(client(running).chat.completions.create, **request)
            wait_until(lambda: engine.running, "the first request to hold its blocks")
            second = pool.submit(client(running).chat.completions.create, **request)
            wait_until(lambda: engine.num_waiting == 1, "the second request to wait: 2 blocks are free, it needs 6")
            replies = [first.result(), second.result()]
        for reply in replies:
            assert reply.choices[0].finish_reason == "length" and reply.usage, reply
            assert reply.usage.completion_tokens == 60, f"cut short at {reply.usage.completion_tokens} tokens"
        assert engine.pool.num_free_blocks == 8 and not engine.running and not engine.num_waiting


def wait_until(condition: Callable[[], object], what: str, seconds: float = 20) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"gave up waiting: {what}"
        time.sleep(0.005)


def test_the_server_modules_import_one_way() -> None:
    """No circle: the app imports the routes, the routes the runner, never the other way (issue 26).
    Each module of ``mini_vllm/server/`` may import only the ones below it in this list."""
    import ast
    from pathlib import Path

    import mini_vllm.server

    order = ["http_errors", "bodies", "read_timeout", "mask_engine", "stack_masks", "stack_decoding", "lazy_masks",
             "decode_wire", "decode_sessions", "decode_worker", "compile_worker", "compile_pool", "structured",
             "templates", "runner", "events", "chat", "responses", "messages", "app"]
    folder = Path(mini_vllm.server.__file__).parent
    assert sorted(order) == sorted(p.stem for p in folder.glob("*.py") if p.stem != "__init__"), (
        "a new module in mini_vllm/server/: give it its place in this order")
    for name in order:
        tree = ast.parse((folder / f"{name}.py").read_text(encoding="utf-8"))
        imported = {node.module.rsplit(".", 1)[-1] for node in ast.walk(tree)
                    if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("mini_vllm.server.")}
        above = imported & set(order[order.index(name):])
        assert not above, f"mini_vllm/server/{name}.py imports {sorted(above)}, which come after it: a circle"
