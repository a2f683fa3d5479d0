"""The demo page in a real headless Chromium, against the real server on 127.0.0.1.

What a person would see, read from the DOM (never from pixels):
- left pane ("decode each token alone"): the browser's own TextDecoder turns split characters into
  U+FFFD, and the page's counter agrees with the text;
- right pane ("the course pipeline"): the reply exactly as scripted, no U+FFFD; a tool call's name
  once and arguments that JSON.parse; a blank starter's stub shown as a message naming the task.

The browser is Debian's ``chromium`` driven through its ``chromium-driver`` (``make browser`` installs
both). Selenium is handed the driver's path, so Selenium Manager never runs and nothing is
downloaded. Without a browser the tests are skipped with the install command, except under CI
(env ``CI`` set), where a missing browser is a failure. One browser session serves every case.
Screenshots of the finished page go to build/demo/.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mini_vllm.demo import load_demo_tokenizer
from mini_vllm.labs import REPO_ROOT, load_lab
from mini_vllm.serving import BackgroundServer, build_engine
from mini_vllm.toy_model import ToyModel
from mini_vllm.toy_scripts import (
    OSAKA_CALL,
    PARIS_CALL,
    SCRIPTS,
    STOP_ANSWER,
    STOP_THOUGHT,
    WEATHER_CALL,
    WRITE_FILE_CALL,
)

# One worker runs this whole module under pytest-xdist: one Chromium to start, not one per worker.
pytestmark = pytest.mark.xdist_group("browser")

SCREENSHOTS = REPO_ROOT / "build" / "demo"
DELAY_MS = 5  # small, so the whole module stays quick, but every token still arrives on its own
HOW_TO_INSTALL = ("the demo's browser test needs Chromium and its driver: run `make browser` (apt: chromium "
                  "chromium-driver fonts-noto-cjk fonts-noto-color-emoji), or set CHROMIUM and CHROMEDRIVER")

# Everything the tests read, in one round trip, straight from the DOM.
READ_PAGE = """
const text = (id) => document.getElementById(id).textContent;
return {
  run: document.body.dataset.run,
  pipeline: text('pipeline-file'),
  naive: {state: naive.dataset.state, text: text('naive-text'), status: text('naive-status'),
          tokens: text('naive-token-count'), fffd: text('naive-fffd-count')},
  script: document.getElementById('script').value,
  // The content pane in order: runs of text and tool-call boxes, as the page laid them out.
  flow: [...document.getElementById('course-text').children].map((part) =>
    part.classList.contains('tool-call') ? {call: part.dataset.name} : {text: part.textContent}),
  course: {state: course.dataset.state, reasoning: text('course-reasoning'),
           text: [...document.querySelectorAll('#course-text .text')].map((run) => run.textContent).join(''),
           status: text('course-status'), tokens: text('course-token-count'), fffd: text('course-fffd-count'),
           output: text('course-output')},
  tools: [...document.querySelectorAll('#course-text .tool-call')].map((box) => {
    const args = box.querySelector('.tool-args').textContent;
    let parsed = null, error = null;
    try { parsed = JSON.parse(args); } catch (e) { error = String(e); }
    const name = box.querySelector('.tool-name');
    const view = box.querySelector('.tool-view');
    return {name: name.textContent, json: box.dataset.json, args, parsed, error,
            badge: getComputedStyle(name, '::after').content,  // the verdict the reader sees beside the name
            view: view.hidden ? null : view.innerText, raw_shown: !box.querySelector('.tool-args').hidden};
  }),
};
"""


def find_browser() -> tuple[str, str] | None:
    """Chromium and chromedriver: from CHROMIUM / CHROMEDRIVER, else the usual Debian paths."""
    chromium = os.environ.get("CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    driver = os.environ.get("CHROMEDRIVER") or shutil.which("chromedriver")
    if driver is None and Path("/usr/lib/chromium/chromedriver").is_file():
        driver = "/usr/lib/chromium/chromedriver"
    return (chromium, driver) if chromium and driver else None


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    found = find_browser()
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.options import Options
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        found = None
    if found is None:
        if os.environ.get("CI"):
            pytest.fail(f"CI is set, so the browser test must run, but no browser was found: {HOW_TO_INSTALL}")
        pytest.skip(HOW_TO_INSTALL)
    chromium, driver_path = found
    options = Options()
    options.binary_location = chromium
    # The --disable-* set keeps Chromium from phoning home at start-up, which on a closed
    # network means failed lookups and refused connections before the first page.
    for argument in ("--headless=new", "--disable-dev-shm-usage", "--disable-gpu", "--window-size=1280,860",
                     "--lang=en-US", "--no-first-run", "--disable-extensions", "--disable-background-networking",
                     "--disable-component-update", "--disable-sync", "--disable-quic"):
        options.add_argument(argument)
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        options.add_argument("--no-sandbox")  # Chromium refuses to start as root with its sandbox on
    driver = webdriver.Chrome(service=Service(executable_path=driver_path), options=options)
    driver.set_script_timeout(30)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture(scope="module")
def server() -> Iterator[BackgroundServer]:
    with BackgroundServer(build_engine("bpe"), pipeline=load_lab("lab-02", "solution")) as running:
        yield running


def open_page(driver: Any, server: BackgroundServer) -> Any:
    """Load the demo page and wait until its settings are in; returns a waiter."""
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get(server.base_url.removesuffix("/v1") + "/demo")
    wait = WebDriverWait(driver, 60, poll_frequency=0.05)
    wait.until(lambda d: d.execute_script("return document.body.dataset.ready") == "true")
    return wait


def stream(driver: Any, server: BackgroundServer, tokenizer: str, script: str, shot: str,
           delay_ms: int = DELAY_MS) -> dict[str, Any]:
    """Open the page, pick a reply and a tokenizer with the page's own controls, stream it, read the result."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    wait = open_page(driver, server)
    Select(driver.find_element(By.ID, "script")).select_by_value(script)
    Select(driver.find_element(By.ID, "tokenizer")).select_by_value(tokenizer)
    driver.execute_script("const s = document.getElementById('delay'); s.value = arguments[0];"
                          "s.dispatchEvent(new Event('input'));", delay_ms)
    driver.find_element(By.ID, "run").click()
    wait.until(lambda d: d.execute_script("return document.body.dataset.run") == "done",
               f"the page never finished streaming {script!r} on {tokenizer}")
    page: dict[str, Any] = driver.execute_script(READ_PAGE)
    path = SCREENSHOTS / f"{shot}.png"
    driver.save_screenshot(str(path))
    assert path.read_bytes().startswith(b"\x89PNG"), f"no screenshot at {path}"
    return page


def naive_oracle(tokenizer: str, script: str) -> tuple[str, int]:
    """What decoding each token alone must show (the stdlib's UTF-8 decoder, same replacement rule as
    the WHATWG decoder browsers use), and how many tokens the reply has, EOS included."""
    chosen = load_demo_tokenizer(tokenizer)
    ids = ToyModel(chosen).reply_ids(script)
    shown = "".join(chosen.decode_single_token_bytes(i).decode("utf-8", "replace")
                    for i in ids if i not in chosen.all_special_ids)
    return shown, len(ids)


@pytest.mark.parametrize("script", ["japanese", "emoji"])
@pytest.mark.parametrize("tokenizer", ["byte", "bpe"])
def test_naive_pane_shows_diamonds_and_course_pane_shows_the_reply(browser: Any, server: BackgroundServer,
                                                                   tokenizer: str, script: str) -> None:
    page = stream(browser, server, tokenizer, script, shot=f"{tokenizer}-{script}")
    naive, course = page["naive"], page["course"]
    expected_naive, token_count = naive_oracle(tokenizer, script)
    assert (naive["state"], course["state"]) == ("done", "done"), (
        f"both panes should finish; left says {naive['status']!r}, right says {course['status']!r}")

    assert "\ufffd" in naive["text"], (f"decoding each {tokenizer} token alone should break {script} text "
                                       f"into U+FFFD, but the left pane shows {naive['text']!r}")
    assert naive["text"] == expected_naive, (
        "the left pane must be each token's bytes decoded alone, by the browser's TextDecoder:\n"
        f"  shown:    {naive['text']!r}\n  expected: {expected_naive!r}")
    assert int(naive["fffd"]) == naive["text"].count("\ufffd"), (
        f"the left U+FFFD counter says {naive['fffd']} but the pane shows {naive['text'].count(chr(0xFFFD))}")
    assert int(naive["tokens"]) == token_count, f"the left pane should count {token_count} tokens"

    assert course["text"] == SCRIPTS[script], (
        "the right pane must show the scripted reply exactly, as the course pipeline streamed it:\n"
        f"  shown:    {course['text']!r}\n  expected: {SCRIPTS[script]!r}")
    assert "\ufffd" not in course["output"] and course["fffd"] == "0", (
        f"the course pipeline must never show U+FFFD for valid text; the right pane shows {course['output']!r}")
    assert int(course["tokens"]) == token_count, (
        f"the right pane's usage should report the same {token_count} tokens as the left pane received")


@pytest.mark.parametrize(("tokenizer", "script", "calls"), [
    ("byte", "weather", [WEATHER_CALL]),
    ("bpe", "two tools", [PARIS_CALL, OSAKA_CALL]),
])
def test_tool_calls_show_each_name_once_and_arguments_that_parse(browser: Any, server: BackgroundServer,
                                                                 tokenizer: str, script: str,
                                                                 calls: list[dict[str, Any]]) -> None:
    page = stream(browser, server, tokenizer, script, shot=f"{tokenizer}-{script.replace(' ', '-')}")
    assert page["course"]["state"] == "done", page["course"]["status"]
    shown = [(tool["name"], tool["parsed"]) for tool in page["tools"]]
    expected = [(call["name"], call["arguments"]) for call in calls]
    assert shown == expected, (
        "each tool call must appear once, its name shown once and its arguments JSON.parse-able in the page:\n"
        f"  shown:    {page['tools']!r}\n  expected: {expected!r}")
    assert all(tool["json"] == "valid" for tool in page["tools"]), page["tools"]
    assert "<tool_call>" not in page["course"]["output"], "the tool-call tags must not reach the content"


def test_each_call_is_shown_where_the_model_wrote_it(browser: Any, server: BackgroundServer) -> None:
    """The prose around a call keeps its own spaces; with the box between them no double space appears."""
    page = stream(browser, server, "bpe", "two tools", shot="bpe-two-tools-flow")
    expected = [{"text": "I will check both cities. "}, {"call": PARIS_CALL["name"]}, {"text": " And then: "},
                {"call": OSAKA_CALL["name"]}, {"text": " Done."}]
    assert page["flow"] == expected, (
        f"text and calls must be shown in the order written:\n  shown:    {page['flow']}\n  expected: {expected}")


def test_long_arguments_show_real_line_breaks(browser: Any, server: BackgroundServer) -> None:
    """A file's content is shown as text, its JSON escapes undone: no literal backslash-n on screen."""
    page = stream(browser, server, "bpe", "write file", shot="bpe-write-file", delay_ms=0)  # 600 tokens: no pacing
    [tool] = page["tools"]
    content = WRITE_FILE_CALL["arguments"]["content"]
    assert tool["json"] == "valid" and tool["parsed"] == WRITE_FILE_CALL["arguments"], tool["error"]
    assert tool["view"] is not None and not tool["raw_shown"], "a complete call is shown parsed, the raw JSON hidden"
    assert "\\n" not in tool["view"] and content.splitlines()[1] in tool["view"].splitlines(), (
        f"each line of the file on its own line, no literal \\n: {tool['view'][:200]!r}")


def test_a_broken_call_is_never_marked_as_parsing(browser: Any, server: BackgroundServer) -> None:
    """The stream ends with an error inside the call: its arguments may parse, but the call never finished."""
    page = stream(browser, server, "bpe", "broken tool", shot="bpe-broken-tool")
    assert page["course"]["state"] == "error" and "malformed tool call" in page["course"]["status"], page["course"]
    [tool] = page["tools"]
    assert tool["json"] == "incomplete" and "✓" not in tool["badge"] and "never finished" in tool["badge"], tool


def test_think_stop_sends_its_stop_string(browser: Any, server: BackgroundServer) -> None:
    page = stream(browser, server, "bpe", "think stop", shot="bpe-think-stop")
    answer = STOP_ANSWER[: STOP_ANSWER.index("STOP")]
    assert page["course"]["state"] == "done", page["course"]["status"]
    assert (page["course"]["reasoning"], page["course"]["text"]) == (STOP_THOUGHT, answer), (
        f"the thought whole (STOP in it does not count), the answer cut before STOP: {page['course']}")


@pytest.mark.parametrize(("api", "first", "inner", "last"), [
    ("chat", "data: {", '"tool_calls"', "data: [DONE]"),
    ("responses", "event: response.created", "event: response.function_call_arguments.delta",
     "event: response.completed"),
    ("messages", "event: message_start", "input_json_delta", "event: message_stop"),
])
def test_the_wire_pane_shows_the_chosen_apis_own_stream(browser: Any, server: BackgroundServer, api: str,
                                                         first: str, inner: str, last: str) -> None:
    """Under both panes, the raw stream of the API picked: OpenAI chunks, or a typed event stream (lab-07)."""
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get(server.base_url.removesuffix("/v1") + f"/demo?script=weather&tokenizer=bpe&delay=0&api={api}&run=1")
    WebDriverWait(browser, 60, poll_frequency=0.05).until(
        lambda d: d.execute_script("return document.body.dataset.run") == "done", f"the {api} stream never ended")
    state, status, wire = browser.execute_script(
        "const p = document.getElementById('events');"
        "return [p.dataset.state, document.getElementById('events-status').textContent,"
        " document.getElementById('raw-events').textContent];")
    assert state == "done", f"the wire pane must finish its {api} stream: {status}"
    blocks = [block for block in wire.split("\n\n") if block.strip()]
    assert blocks and blocks[0].startswith(first) and blocks[-1].startswith(last) and inner in wire, (
        f"{api}: the pane shows the stream as sent, from {first!r} to {last!r}, the call's arguments as "
        f"{inner!r} on the way: {wire[:300]!r} ... {wire[-200:]!r}")


def test_the_page_opens_on_the_japanese_reply(browser: Any, server: BackgroundServer) -> None:
    open_page(browser, server)
    assert browser.execute_script(READ_PAGE)["script"] == "japanese", "the README's first example is the default"


def test_blank_starter_shows_the_task_to_implement(browser: Any) -> None:
    """``LAB_IMPL=starter make demo`` on fresh starters: a message naming the task, not a blank pane."""
    with BackgroundServer(build_engine("bpe"), pipeline=load_lab("lab-02", "starter")) as starter:
        page = stream(browser, starter, "bpe", "japanese", shot="starter-japanese")
    course = page["course"]
    assert course["state"] == "error", f"the right pane should report the stub, it is {course['state']!r}"
    assert "NotImplementedError" in course["status"] and "lab-02 task 1" in course["status"], (
        f"the right pane should name the task to implement, it says {course['status']!r}")
    assert "Traceback" not in course["status"]
    assert page["pipeline"].endswith("starter.py"), f"the page should say which file runs, it says {page['pipeline']!r}"
    assert page["naive"]["state"] == "done" and "\ufffd" in page["naive"]["text"], "the naive pane needs no lab"


def test_stub_reached_mid_stream_is_shown_in_band(browser: Any) -> None:
    """A pipeline that starts but reaches a stub later: the server's in-band error event reaches the page."""
    solution = load_lab("lab-02", "solution")

    class HalfDone(solution.OutputPipeline):  # type: ignore[name-defined,misc]
        def finish(self, engine_finish_reason: str) -> Any:
            raise NotImplementedError("lab-02 task 2: implement OutputPipeline.finish — see README, 'Your task'")

    class Pipeline:
        OutputPipeline = HalfDone
        ChunkFormatter = solution.ChunkFormatter

    with BackgroundServer(build_engine("bpe"), pipeline=Pipeline) as half:  # type: ignore[arg-type]
        page = stream(browser, half, "bpe", "chinese", shot="half-done-chinese")
    course = page["course"]
    assert course["state"] == "error" and "lab-02 task 2" in course["status"], course
    assert course["text"], "what the pipeline streamed before the stub should stay on screen"


@pytest.mark.parametrize("field", ["reasoning", "reasoning_content"])
def test_reasoning_deltas_are_shown_apart_from_the_content(browser: Any, field: str) -> None:
    """vLLM sends thoughts as ``delta.reasoning`` (older vLLM and DeepSeek: ``reasoning_content``).

    Until the reasoning lab is wired into the server, a formatter that sends every piece of text
    as reasoning stands in for a thinking model.
    """
    solution = load_lab("lab-02", "solution")

    class ThinkingFormatter(solution.ChunkFormatter):  # type: ignore[name-defined,misc]
        def chunks(self, out: Any) -> list[dict[str, Any]]:
            chunks: list[dict[str, Any]] = super().chunks(out)
            for chunk in chunks:
                for choice in chunk["choices"]:
                    if "content" in choice.get("delta", {}):
                        choice["delta"][field] = choice["delta"].pop("content")
            return chunks

    class Pipeline:
        OutputPipeline = solution.OutputPipeline
        ChunkFormatter = ThinkingFormatter

    with BackgroundServer(build_engine("bpe"), pipeline=Pipeline) as thinking:  # type: ignore[arg-type]
        page = stream(browser, thinking, "byte", "japanese", shot=f"thinking-{field}")
    course = page["course"]
    assert course["state"] == "done", course["status"]
    assert (course["reasoning"], course["text"]) == (SCRIPTS["japanese"], ""), (
        f"text sent as delta.{field} belongs in the reasoning box, not the content: {course!r}")
