"""Lab 01 tests: tool calls out of streamed model text.

Run against your code:  make lab-01
Replies are built from known prose and known calls, so the parsers are checked against
what was actually written, for every way of cutting the reply into deltas.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mini_vllm.labs import load_lab
from mini_vllm.testing.strategies import GeneratedReply, chunkings, split_at, tool_call_replies
from mini_vllm.testing.trace import Step, format_trace, quote

lab = load_lab("lab-01")

TASKS = {
    1: "parse_call: one block, checked",
    2: "find_end_tag: the end tag outside JSON strings",
    3: "parse_tool_calls: a whole reply",
    4: "feed: the tag hold-back, streaming",
    5: "finish: the end of the reply",
}

WEATHER = {"name": "get_weather", "arguments": {"city": "東京", "unit": "celsius"}}


def block(call: dict[str, Any], ensure_ascii: bool = False, padding: str = "") -> str:
    return f"<tool_call>{padding}{json.dumps(call, ensure_ascii=ensure_ascii)}{padding}</tool_call>"


def call(name: str, arguments: dict[str, Any]) -> Any:
    return lab.ToolCall(name, arguments)


# ----------------------------------------------------------------------------- helpers


def stream(chunks: Sequence[str]) -> tuple[list[Any], Any]:
    parser = lab.StreamingToolParser()
    deltas = [parser.feed(chunk) for chunk in chunks]
    return deltas, parser.finish()


def collect(chunks: Sequence[str]) -> tuple[str, list[Any]]:
    deltas, last = stream(chunks)
    everything = [*deltas, last]
    return "".join(d.content for d in everything), [c for d in everything for c in d.tool_calls]


def trace(chunks: Sequence[str]) -> str:
    parser = lab.StreamingToolParser()
    steps = []
    for chunk in chunks:
        delta = parser.feed(chunk)
        calls = "".join(f" +call {c.name}" for c in delta.tool_calls)
        steps.append(Step("feed", chunk, delta.content, f"held {quote(parser.held_text)}{calls}"))
    return format_trace(steps, "the stream, delta by delta", ("content shown", "state"))


# ------------------------------------------------------------- task 1: one block, checked


@pytest.mark.task(1)
def test_parse_call_reads_name_and_arguments() -> None:
    assert lab.parse_call(json.dumps(WEATHER)) == call("get_weather", {"city": "東京", "unit": "celsius"})
    assert lab.parse_call('\n {"name": "ping", "arguments": {}} \n') == call("ping", {})


@pytest.mark.task(1)
@pytest.mark.parametrize("raw", [
    '{"name": "get_weather", "arguments": {"city": "Paris"}',  # cut short
    'not json at all',
    '["get_weather", {}]',  # not an object
    '{"arguments": {}}',  # no name
    '{"name": 7, "arguments": {}}',  # name not a string
    '{"name": "", "arguments": {}}',  # empty name
    '{"name": "f", "arguments": "{\\"city\\": \\"Paris\\"}"}',  # arguments as a string
    '{"name": "f"}',  # no arguments
], ids=["truncated", "not-json", "array", "no-name", "name-int", "name-empty", "args-string", "no-args"])
def test_malformed_call_raises_with_the_raw_text(raw: str) -> None:
    with pytest.raises(lab.ToolCallParseError) as raised:
        lab.parse_call(raw)
    assert raised.value.raw == raw, "the error must carry the raw block, so nothing is silently lost"
    assert isinstance(raised.value, ValueError) and raised.value.reason


# ------------------------------------------------ task 2: the end tag outside JSON strings


@pytest.mark.task(2)
@pytest.mark.parametrize(("body", "expected"), [
    ('{"a": 1}</tool_call>', 8),
    ('{"a": "</tool_call>"}</tool_call>', 21),  # inside a string: not the end
    ('{"a": "say \\"</tool_call>\\" ok"}</tool_call>', 32),  # escaped quotes stay inside the string
    ('{"a": "back\\\\"}</tool_call>', 15),  # an escaped backslash does not escape the quote
    ('{"a": 1}', None),
    ('{"a": 1}</tool_', None),  # the tag is still arriving
])
def test_find_end_tag_examples(body: str, expected: int | None) -> None:
    end, _ = lab.find_end_tag(body)
    assert end == expected, f"in {quote(body)}: expected the end tag at {expected}, got {end}"


@pytest.mark.task(2)
@given(st.data(), tool_call_replies(max_calls=1))
def test_find_end_tag_resumes_across_pieces(data: st.DataObject, reply: GeneratedReply) -> None:
    """Fed piece by piece with its saved state, the scanner finds the same end as on the whole body."""
    if not reply.blocks:
        return
    start, end = reply.blocks[0]
    body = reply.text[start + len("<tool_call>") :]
    whole, _ = lab.find_end_tag(body)
    assert whole == end - start - len("<tool_call>") - len("</tool_call>")
    grown, state, found = "", lab.ScanState(), None
    for piece in data.draw(chunkings(body), label="pieces"):
        grown += piece
        found, state = lab.find_end_tag(grown, state)
        if found is not None:
            break
    assert found == whole


# ------------------------------------------------------------ task 3: a whole reply


@pytest.mark.task(3)
def test_prose_before_between_and_after_calls_is_kept() -> None:
    text = "Checking two cities. " + block(WEATHER) + " and " + block(WEATHER, padding="\n") + " Done."
    parsed = lab.parse_tool_calls(text)
    assert parsed.content == "Checking two cities.  and  Done."
    assert parsed.tool_calls == [call(**WEATHER), call(**WEATHER)], "the second call must not be lost"


@pytest.mark.task(3)
def test_end_tag_inside_an_argument_does_not_close_the_call() -> None:
    tricky = {"name": "write_file", "arguments": {"text": "close with </tool_call> then stop"}}
    parsed = lab.parse_tool_calls("ok " + block(tricky) + " after")
    assert parsed.tool_calls == [call(**tricky)] and parsed.content == "ok  after"


@pytest.mark.task(3)
@pytest.mark.parametrize("ensure_ascii", [False, True])
def test_cjk_and_emoji_arguments_survive(ensure_ascii: bool) -> None:
    wild = {"name": "send", "arguments": {"to": "Zoë", "text": "发射 🚀🫨 «ok»", "tags": ["日本語", "\ufffd"]}}
    parsed = lab.parse_tool_calls(block(wild, ensure_ascii=ensure_ascii))
    assert parsed.tool_calls == [call(**wild)], "arguments must come back exactly, not escaped or mangled"


@pytest.mark.task(3)
def test_false_alarms_are_prose() -> None:
    text = "Use <today> as a tag; a < b; <tool> is not a call; nor is </tool_call>."
    assert lab.parse_tool_calls(text) == lab.ParsedOutput(text, [])


@pytest.mark.task(3)
def test_block_left_open_at_the_end() -> None:
    complete = "Sure. <tool_call>" + json.dumps(WEATHER)  # the model stopped right after the JSON
    assert lab.parse_tool_calls(complete) == lab.ParsedOutput("Sure. ", [call(**WEATHER)])
    with pytest.raises(lab.ToolCallParseError) as raised:
        lab.parse_tool_calls('Sure. <tool_call>{"name": "get_weather", "argu')
    assert raised.value.raw == '{"name": "get_weather", "argu'


@pytest.mark.task(3)
def test_malformed_block_in_a_reply_is_loud() -> None:
    with pytest.raises(lab.ToolCallParseError):
        lab.parse_tool_calls("before <tool_call>{oops}</tool_call> after")


@pytest.mark.task(3)
@given(tool_call_replies())
def test_batch_recovers_exactly_what_was_written(reply: GeneratedReply) -> None:
    parsed = lab.parse_tool_calls(reply.text)
    assert parsed.content == reply.prose
    assert parsed.tool_calls == [call(name, arguments) for name, arguments in reply.calls]


# ------------------------------------------------------------ task 4: streaming, examples


@pytest.mark.task(4)
def test_content_flows_immediately() -> None:
    chunks = ["Hello", ", wor", "ld! 你好 🫨"]
    deltas, _ = stream(chunks)
    assert [d.content for d in deltas] == chunks, "prose with no '<' in it is never held\n" + trace(chunks)


@pytest.mark.task(4)
def test_a_partial_tag_is_held_not_leaked() -> None:
    chunks = ["Let me look that up. <tool", "_call>", json.dumps(WEATHER), "</tool_call>"]
    deltas, last = stream(chunks)
    shown = "".join(d.content for d in [*deltas, last])
    assert shown == "Let me look that up. ", "a half tag reached the user\n" + trace(chunks)
    assert deltas[-1].tool_calls == [call(**WEATHER)], "the call arrives when its block closes"


@pytest.mark.task(4)
@pytest.mark.parametrize(
    "chunks", [["It is <", "today> now"], ["if a <", " b then"], ["<tool", ">x"], ["<tool_c", "all_me"]],
    ids=["today", "less-than", "tool-tag", "tool_call_me"],
)
def test_false_alarms_are_released_as_soon_as_they_cannot_be_a_tag(chunks: list[str]) -> None:
    deltas, last = stream(chunks)
    assert "".join(d.content for d in deltas) == "".join(chunks), "held forever\n" + trace(chunks)
    assert last.content == ""


@pytest.mark.task(4)
def test_two_calls_and_the_text_around_them_stream_through() -> None:
    text = "A " + block(WEATHER) + " B " + block({"name": "ping", "arguments": {}}) + " C"
    content, calls = collect(list(text))  # one character at a time
    assert content == "A  B  C" and calls == [call(**WEATHER), call("ping", {})], trace(list(text))


@pytest.mark.task(4)
@pytest.mark.parametrize("cut", [0, 20], ids=["one-delta", "tag-and-prose-together"])
def test_prose_arriving_with_an_end_tag_is_kept(cut: int) -> None:
    text = "Before. " + block(WEATHER) + " After the call, in the same delta."
    chunks = [text] if cut == 0 else [text[:cut], text[cut:]]
    content, calls = collect(chunks)
    assert content == "Before.  After the call, in the same delta.", trace(chunks)
    assert calls == [call(**WEATHER)]


@pytest.mark.task(4)
def test_end_tag_split_inside_an_argument_string() -> None:
    tricky = {"name": "note", "arguments": {"text": "</tool_call> is just text here"}}
    chunks = split_at(block(tricky), range(3, len(block(tricky)), 5))
    content, calls = collect(chunks)
    assert calls == [call(**tricky)] and content == ""


@pytest.mark.task(4)
def test_malformed_call_in_a_stream_raises_and_changes_nothing() -> None:
    parser = lab.StreamingToolParser()
    assert parser.feed("Plan: <tool_call>{not json").content == "Plan: "
    with pytest.raises(lab.ToolCallParseError) as raised:
        parser.feed("}</tool_call> more <too")
    assert raised.value.raw == "{not json}"
    assert parser.held_text == "", "a failed feed must leave the parser as it was"
    with pytest.raises(lab.ToolCallParseError):
        parser.feed("}</tool_call>")  # the same block is still open: still malformed, still loud


@pytest.mark.task(4)
@pytest.mark.parametrize("bad", [None, b"<tool_call>", 3, ["x"]], ids=repr)
def test_non_str_delta_raises_and_loses_nothing(bad: object) -> None:
    parser = lab.StreamingToolParser()
    assert parser.feed("ok <tool").content == "ok "
    with pytest.raises(TypeError):
        parser.feed(bad)  # type: ignore[arg-type]
    assert parser.held_text == "<tool"
    assert parser.feed("> fine").content == "<tool> fine"


@pytest.mark.task(4)
def test_fifty_random_slicings() -> None:
    text = ("I'll check the weather 🌦 first. " + block(WEATHER, padding="\n") + " Then a note <today>, a < b: "
            + block({"name": "note", "arguments": {"text": "has </tool_call> and \"quotes\" 🫨"}}, ensure_ascii=True)
            + " and done. <tool")
    expected = lab.parse_tool_calls(text)
    for seed in range(50):
        rng = random.Random(seed)
        chunks = split_at(text, sorted(rng.sample(range(1, len(text)), rng.randint(1, len(text) // 4))))
        content, calls = collect(chunks)
        assert lab.ParsedOutput(content, calls) == expected, f"seed {seed}\n" + trace(chunks)


# ---------------------------------------------------------- task 4: streaming, properties


@pytest.mark.task(4)
@given(st.data(), tool_call_replies())
def test_streaming_equals_batch_for_any_chunking(data: st.DataObject, reply: GeneratedReply) -> None:
    chunks = data.draw(chunkings(reply.text), label="chunks")
    content, calls = collect(chunks)
    assert lab.ParsedOutput(content, calls) == lab.parse_tool_calls(reply.text), trace(chunks)


def prose_seen(reply: GeneratedReply, fed: int) -> tuple[str, str] | None:
    """After ``fed`` characters: (all prose seen, the part of it since the last block).

    A partially received start tag counts as prose (it may still be one); None while
    inside a block.
    """
    seen, position = [], 0
    for start, end in reply.blocks:
        if fed <= start:
            break
        seen.append(reply.text[position:start])
        if fed < start + len("<tool_call>"):
            return "".join(seen) + reply.text[start:fed], reply.text[position:fed]
        if fed < end:
            return None
        position = end
    return "".join(seen) + reply.text[position:fed], reply.text[position:fed]


@pytest.mark.task(4)
@given(st.data(), tool_call_replies())
def test_no_tag_ever_leaks_and_held_text_is_exactly_a_partial_tag(data: st.DataObject, reply: GeneratedReply) -> None:
    chunks = data.draw(chunkings(reply.text), label="chunks")
    parser = lab.StreamingToolParser()
    shown, fed = "", 0
    for chunk in chunks:
        shown += parser.feed(chunk).content
        fed += len(chunk)
        assert reply.prose.startswith(shown), f"shown {quote(shown)}: not prose the model wrote\n" + trace(chunks)
        view = prose_seen(reply, fed)
        if view is None:
            continue
        seen, since_last_block = view
        must_hold = next((since_last_block[i:] for i in range(len(since_last_block))
                          if "<tool_call>".startswith(since_last_block[i:])), "")
        assert (shown, parser.held_text) == (seen[: len(seen) - len(must_hold)], must_hold), (
            f"after {fed} characters: shown + held should be {quote(seen)}, holding exactly {quote(must_hold)}\n"
            + trace(chunks)
        )


# ------------------------------------------------------------------- task 5: finish


@pytest.mark.task(5)
def test_finish_releases_a_held_false_alarm() -> None:
    deltas, last = stream(["The end is <tool"])
    assert deltas[0].content == "The end is " and last.content == "<tool" and last.tool_calls == []


@pytest.mark.task(5)
def test_finish_accepts_a_complete_open_block_and_rejects_a_broken_one() -> None:
    _, last = stream(["Sure. <tool_call>", json.dumps(WEATHER)])
    assert last.tool_calls == [call(**WEATHER)]
    parser = lab.StreamingToolParser()
    parser.feed('<tool_call>{"name": "get_wea')
    with pytest.raises(lab.ToolCallParseError) as raised:
        parser.finish()
    assert raised.value.raw == '{"name": "get_wea'


@pytest.mark.task(5)
def test_nothing_after_finish() -> None:
    parser = lab.StreamingToolParser()
    parser.feed("done")
    parser.finish()
    with pytest.raises(RuntimeError):
        parser.feed("more")


# -------------------------------------------------------------------------- control


@pytest.mark.control
def test_parsing_each_chunk_alone_leaks_half_a_tag() -> None:
    """The naive parser looks for a whole tag inside each chunk: '<tool' then '_call>' is just prose to it."""
    shown = ""
    for chunk in ["Let me check. <tool", "_call>", json.dumps(WEATHER), "</tool_call>"]:
        shown += chunk if "<tool_call>" not in chunk else chunk.split("<tool_call>")[0]
    assert "<tool" in shown, "the user saw the half tag"
