"""The demo's server side, over HTTP: the pickers' settings, the naive pane's token-bytes stream,
the per-tokenizer OpenAI servers, and the 400s for bad input. (The page itself runs in a real
browser in test_demo_browser.py.)"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Iterator
from typing import Any

import httpx
import jsonschema
import openai
import pytest

from mini_vllm.demo import (
    PAGE_DIR,
    TOKENIZER_NAMES,
    PacedEngine,
    _request_delay_s,
    demo_scripts,
    load_demo_tokenizer,
)
from mini_vllm.labs import load_lab
from mini_vllm.serving import MODEL_NAME, BackgroundServer, build_engine
from mini_vllm.tokenizers.byte import ByteTokenizer
from mini_vllm.toy_model import ToyModel
from mini_vllm.toy_scripts import SCRIPTS, WEATHER_JSON_TEXT, script_for

SOLUTION = load_lab("lab-02", "solution")


@pytest.fixture(scope="module")
def root() -> Iterator[str]:
    with BackgroundServer(build_engine("byte"), pipeline=SOLUTION) as running:
        yield running.base_url.removesuffix("/v1")


def token_events(response: httpx.Response) -> list[dict[str, object]]:
    data = [line.removeprefix("data: ") for line in response.text.split("\n\n") if line.startswith("data: ")]
    assert data[-1] == "[DONE]", f"the token-bytes stream must end with [DONE], ended with {data[-1]!r}"
    return [json.loads(item) for item in data[:-1]]


def test_page_and_its_files_are_served_and_fetch_nothing_from_outside(root: str) -> None:
    page = httpx.get(root + "/demo")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    for name, kind in [("demo.js", "text/javascript"), ("demo.css", "text/css")]:
        assert f"/demo/{name}" in page.text, f"the page should load /demo/{name}"
        served = httpx.get(f"{root}/demo/{name}")
        assert served.status_code == 200 and served.headers["content-type"].startswith(kind), (name, served.headers)
    for name in ("index.html", "demo.js", "demo.css"):
        assert not re.search(r"(https?:)?//[\w.-]+\.\w+/", (PAGE_DIR / name).read_text(encoding="utf-8")), (
            f"{name} refers to another host: the demo must work offline")


def test_scripts_offered_are_the_toy_models_and_each_keyword_selects_its_own(root: str) -> None:
    settings = httpx.get(root + "/demo/scripts").json()
    assert settings["tokenizers"] == list(TOKENIZER_NAMES) and settings["model"] == MODEL_NAME
    keys = [script["key"] for script in settings["scripts"]]
    assert {"japanese", "chinese", "emoji", "weather"} <= set(keys), keys
    for key in keys:
        assert script_for(key) == SCRIPTS[key], f"sending {key!r} must select the {key!r} script"
    assert keys == list(demo_scripts())


@pytest.mark.parametrize("tokenizer", ["byte", "bpe"])  # byte-level: the tokens' bytes concatenate to the text
@pytest.mark.parametrize("script", ["japanese", "emoji", "weather"])
def test_token_bytes_are_each_generated_tokens_raw_bytes(root: str, tokenizer: str, script: str) -> None:
    chosen = load_demo_tokenizer(tokenizer)
    response = httpx.get(root + "/demo/token-bytes", params={"tokenizer": tokenizer, "script": script})
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
    events = token_events(response)
    ids = ToyModel(chosen).reply_ids(script)  # the same model and script the chat endpoint runs
    assert [event["id"] for event in events] == ids
    assert [event["index"] for event in events] == list(range(len(ids)))
    for event in events:
        token_id = event["id"]
        assert isinstance(token_id, int)
        assert event["hex"] == chosen.decode_single_token_bytes(token_id).hex(), event
        assert event["special"] == (token_id in chosen.all_special_ids), event
    reply = b"".join(bytes.fromhex(str(e["hex"])) for e in events if not e["special"])
    assert reply.decode("utf-8") == SCRIPTS[script], "all the bytes together are the scripted reply"


@pytest.mark.parametrize(("query", "param", "words"), [
    ({"tokenizer": "gpt2", "script": "japanese"}, "tokenizer", "unknown tokenizer 'gpt2'"),
    ({"script": "japanese"}, "tokenizer", "unknown tokenizer"),
    ({"tokenizer": "byte", "script": "klingon"}, "script", "unknown script 'klingon'"),
    ({"tokenizer": "byte", "script": "long"}, "script", "unknown script"),
    ({"tokenizer": "byte", "script": "japanese", "delay_ms": "-1"}, "delay_ms", "from 0 to"),
    ({"tokenizer": "byte", "script": "japanese", "delay_ms": "fast"}, "delay_ms", "'fast'"),
    ({"tokenizer": "byte", "script": "japanese", "delay_ms": "nan"}, "delay_ms", "from 0 to"),
    ({"tokenizer": "byte", "script": "japanese", "schema": "yaml"}, "schema", "unknown schema 'yaml'"),
], ids=["unknown-tokenizer", "no-tokenizer", "unknown-script", "hidden-script", "negative-delay",
        "delay-not-a-number", "delay-nan", "unknown-schema"])
def test_bad_token_bytes_requests_get_400_with_openai_error_bodies(root: str, query: dict[str, str], param: str,
                                                                    words: str) -> None:
    response = httpx.get(root + "/demo/token-bytes", params=query)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["param"] == param and words in error["message"] and error["type"] == "invalid_request_error", error


@pytest.mark.parametrize("tokenizer", TOKENIZER_NAMES)
def test_each_tokenizer_has_its_own_openai_server_under_demo(root: str, tokenizer: str) -> None:
    client = openai.OpenAI(base_url=f"{root}/demo/tokenizers/{tokenizer}/v1", api_key="not-needed", max_retries=0,
                           timeout=30)
    stream = client.chat.completions.create(model=MODEL_NAME, messages=[{"role": "user", "content": "japanese"}],
                                            stream=True, stream_options={"include_usage": True},
                                            extra_query={"delay_ms": 1})
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == SCRIPTS["japanese"]
    usage = [c.usage for c in chunks if c.usage]
    expected_tokens = len(ToyModel(load_demo_tokenizer(tokenizer)).reply_ids("japanese"))
    assert usage and usage[0].completion_tokens == expected_tokens, (
        f"the {tokenizer} server must generate with the {tokenizer} tokenizer ({expected_tokens} tokens)")


@pytest.mark.parametrize(("path", "param"), [("/demo/tokenizers/gpt2/v1/chat/completions", "tokenizer"),
                                             ("/demo/tokenizers/bpe/v1/chat/completions?delay_ms=-5", "delay_ms")])
def test_bad_per_tokenizer_requests_get_400(root: str, path: str, param: str) -> None:
    body = {"model": MODEL_NAME, "messages": [{"role": "user", "content": "hi"}]}
    response = httpx.post(root + path, json=body)
    assert response.status_code == 400 and response.json()["error"]["param"] == param, response.text


def test_paced_engine_takes_the_requests_delay_and_falls_back_to_its_own() -> None:
    engine = PacedEngine(ToyModel(ByteTokenizer()), token_delay_s=0.25)
    assert engine.token_delay_s == 0.25

    async def inside_a_request() -> float:
        _request_delay_s.set(0.004)
        return engine.token_delay_s

    assert asyncio.run(inside_a_request()) == 0.004
    assert engine.token_delay_s == 0.25, "a request's delay must not leak to the next request"


def test_unknown_tokenizer_name_is_a_value_error_naming_it() -> None:
    with pytest.raises(ValueError, match="'llama'"):
        load_demo_tokenizer("llama")


def test_favicon_is_served(root: str) -> None:
    """Browsers ask for /favicon.ico on every page: a 404 there is noise in every log."""
    icon = httpx.get(root + "/favicon.ico")
    assert icon.status_code == 200 and icon.headers["content-type"].startswith("image/"), icon.headers


def test_each_script_sends_what_it_needs(root: str) -> None:
    """Tool scripts offer tools (calls are parsed only then); stop scripts send their stop string."""
    requests = {script["key"]: script["request"] for script in httpx.get(root + "/demo/scripts").json()["scripts"]}
    for key, request in requests.items():
        assert ("tools" in request) == ("<tool_call>" in SCRIPTS[key]), (key, request)
        assert ("stop" in request) == ("STOP" in SCRIPTS[key]), (key, request)


@pytest.mark.parametrize("tokenizer", ["byte", "bpe"])
def test_schema_picker_shows_the_same_reply_unmasked_and_constrained(root: str, tokenizer: str) -> None:
    """Left pane: the scoring mode with no mask (prose around the JSON). Right: the same scores under the schema."""
    settings = httpx.get(root + "/demo/scripts").json()
    schema = next(s for s in settings["schemas"] if s["key"] == "weather")
    tokens = token_events(httpx.get(root + "/demo/token-bytes", params={
        "tokenizer": tokenizer, "script": "japanese", "schema": "weather"}, timeout=60))
    unmasked = b"".join(bytes.fromhex(str(t["hex"])) for t in tokens if not t["special"]).decode("utf-8")
    assert WEATHER_JSON_TEXT in unmasked and not unmasked.startswith("{"), (
        f"with no mask the toy model wraps its JSON in prose: {unmasked!r}")
    client = openai.OpenAI(base_url=f"{root}/demo/tokenizers/{tokenizer}/v1", api_key="not-needed", max_retries=0,
                           timeout=60)
    reply = client.chat.completions.create(
        model=MODEL_NAME, messages=[{"role": "user", "content": "japanese" + settings["as_json"]}],
        response_format={"type": "json_schema", "json_schema": {"name": "weather", "strict": True,
                                                                 "schema": schema["schema"]}})
    content = reply.choices[0].message.content or ""
    jsonschema.validate(json.loads(content), schema["schema"])
    assert json.loads(content) == json.loads(WEATHER_JSON_TEXT), "masked, the model still says what it meant to"


def test_schema_picker_offers_a_nested_and_a_recursive_schema_and_serves_both(root: str) -> None:
    """Nesting is lab-08's regex; recursion (a $ref that refers back) needs lab-09's stack: both offered and served."""
    settings = httpx.get(root + "/demo/scripts").json()
    schemas = {s["key"]: s["schema"] for s in settings["schemas"]}

    def nests(schema: Any) -> bool:
        return isinstance(schema, dict) and any(
            isinstance(v, dict) and (v.get("type") in ("object", "array") or nests(v)) for v in
            [*schema.get("properties", {}).values(), schema.get("items")])
    nested = [key for key, schema in schemas.items() if nests(schema) and "$ref" not in json.dumps(schema)]
    recursive = [key for key, schema in schemas.items() if '"$ref": "#' in json.dumps(schema)]
    assert nested and recursive, f"the picker offers a nested and a recursive schema: {sorted(schemas)}"
    client = openai.OpenAI(base_url=f"{root}/demo/tokenizers/bpe/v1", api_key="not-needed", max_retries=0,
                           timeout=120)
    for key in (nested[0], recursive[0]):
        reply = client.chat.completions.create(
            model=MODEL_NAME, messages=[{"role": "user", "content": "japanese" + settings["as_json"]}],
            response_format={"type": "json_schema", "json_schema": {"name": key, "strict": True,
                                                                     "schema": schemas[key]}})
        assert reply.choices[0].finish_reason == "stop", reply
        jsonschema.validate(json.loads(reply.choices[0].message.content or ""), schemas[key])


@pytest.mark.parametrize("tokenizer", ["byte", "tekken"])
def test_injection_box_shows_the_forged_turn_and_lab_10s_prompt(root: str, tokenizer: str) -> None:
    """The page's "Injection" box: the f-string prompt turns the user's special strings into control tokens;
    lab-10's render has the control tokens of the chat's structure only."""
    from mini_vllm.demo import INJECTION_EXAMPLE

    report = httpx.get(root + "/demo/injection", params={"tokenizer": tokenizer}, timeout=60).json()
    assert report["text"] == INJECTION_EXAMPLE, f"with no text the box shows its example: {report}"
    structure = {"byte": ["<|im_start|>", "<|im_end|>", "<|im_start|>", "<|im_end|>", "<|im_start|>"],
                 "tekken": ["<s>", "[INST]", "[/INST]"]}[tokenizer]
    assert report["lab_10"]["control_tokens"] == structure, f"lab-10's prompt: the structure's tokens only: {report}"
    forged = {"byte": ["<|im_start|>", "<|im_end|>", "<|im_start|>", "<|im_end|>", "<|im_start|>", "<|im_end|>",
                       "<|im_start|>"], "tekken": ["[/INST]", "</s>", "[INST]"]}[tokenizer]  # ChatML is text on Tekken
    assert report["f_string"]["control_tokens"] == forged, (
        f"the f-string prompt forges control tokens from the user's text: {report}")
    too_long = httpx.get(root + "/demo/injection", params={"tokenizer": tokenizer, "text": "x" * 2001})
    assert too_long.status_code == 400 and too_long.json()["error"]["param"] == "text", too_long.text
