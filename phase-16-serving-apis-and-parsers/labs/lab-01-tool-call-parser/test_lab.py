"""Lab 01 tests: tool calls out of streamed model text.

Run against your code:  make lab-01
Replies are built from known prose and known calls, so the parsers are checked against
what was actually written, for every way of cutting the reply into deltas. Every
"expected" column in a trace comes from that knowledge (the oracle), never from your code.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from types import ModuleType
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from mini_vllm.labs import load_lab
from mini_vllm.sandbox import each
from mini_vllm.sandbox.probes import install as install_probe
from mini_vllm.testing.expect import must_raise
from mini_vllm.testing.strategies import (
    GeneratedReply,
    WrittenCall,
    WrittenReply,
    chunkings,
    split_at,
    tool_call_replies,
    written_tool_call_replies,
)
from mini_vllm.testing.trace import Step, format_trace, quote

lab = load_lab("lab-01")

TASKS = {
    1: "parse_call: one block, checked",
    2: "find_end_tag: the end tag outside JSON strings",
    3: "parse_tool_calls: a whole reply",
    4: "feed: the tag hold-back, streaming",
    5: "finish: the end of the reply",
    6: "stream the arguments: the name once, then the text as written",
}

WEATHER: dict[str, Any] = {"name": "get_weather", "arguments": {"city": "東京", "unit": "celsius"}}


def block(call: dict[str, Any], ensure_ascii: bool = False, padding: str = "") -> str:
    return f"<tool_call>{padding}{json.dumps(call, ensure_ascii=ensure_ascii)}{padding}</tool_call>"


def call(name: str, arguments: dict[str, Any]) -> Any:
    return lab.ToolCall(name, arguments)


# ----------------------------------------------------------------------------- helpers


def stream(chunks: Sequence[str]) -> tuple[list[Any], Any]:
    parser = lab.StreamingToolParser()
    deltas = each(parser.feed, chunks)
    return deltas, parser.finish()


def collect(chunks: Sequence[str]) -> tuple[str, list[Any]]:
    deltas, last = stream(chunks)
    everything = [*deltas, last]
    return "".join(d.content for d in everything), [c for d in everything for c in d.tool_calls]


def reply_from(*parts: str) -> GeneratedReply:
    """A reply written from prose and whole blocks (made by ``block``): the oracle knows where each block is."""
    text, prose, calls, blocks = "", [], [], []
    for part in parts:
        if part.startswith("<tool_call>") and part.endswith("</tool_call>"):
            payload = json.loads(part[len("<tool_call>") : -len("</tool_call>")])
            calls.append((payload["name"], payload["arguments"]))
            blocks.append((len(text), len(text) + len(part)))
        else:
            prose.append(part)
        text += part
    return GeneratedReply(text, "".join(prose), calls, blocks)


def prose_due(reply: GeneratedReply, fed: int) -> str:
    """The oracle: all the prose that must be shown once ``fed`` characters have arrived.

    Everything outside the blocks, except the longest tail (since the last block) that
    could still become ``<tool_call>``; inside a block, the prose before it.
    """
    shown, position = [], 0
    for start, end in reply.blocks:
        if fed <= start:
            break
        shown.append(reply.text[position:start])
        if fed < end:
            return "".join(shown)
        position = end
    tail = reply.text[position:fed]
    held = next((tail[i:] for i in range(len(tail)) if "<tool_call>".startswith(tail[i:])), "")
    return "".join(shown) + tail[: len(tail) - len(held)]


def trace(chunks: Sequence[str], reply: GeneratedReply) -> str:
    """Your stream's content, delta by delta, beside what the oracle says is due at each step."""
    parser = lab.StreamingToolParser()
    steps, fed, due = [], 0, ""
    for chunk in [*chunks, None]:
        fed += len(chunk or "")
        now_due = prose_due(reply, fed) if chunk is not None else reply.prose
        label = "feed" if chunk is not None else "finish"
        try:
            shown = (parser.feed(chunk) if chunk is not None else parser.finish()).content
        except Exception as error:  # the trace is for a failure message: show the error in its row
            steps.append(Step(label, chunk or "", f"raised {type(error).__name__}", now_due[len(due) :]))
            break
        steps.append(Step(label, chunk or "", shown, now_due[len(due) :]))
        due = now_due
    return format_trace(steps, "the content, delta by delta (expected: the prose the oracle says is due)")


# ------------------------------------------------------------- task 1: one block, checked


@pytest.mark.task(1)
def test_parse_call_reads_name_and_arguments() -> None:
    assert lab.parse_call(json.dumps(WEATHER)) == call("get_weather", {"city": "東京", "unit": "celsius"}), (
        "parse_call must read the name and the arguments object")
    assert lab.parse_call('\n {"name": "ping", "arguments": {}} \n') == call("ping", {}), (
        "whitespace around the JSON is allowed")


@pytest.mark.task(1)
@pytest.mark.parametrize("layout", [{"separators": (",", ":")}, {}, {"indent": 2}, {"ensure_ascii": False}],
                         ids=["compact", "spaced", "indented", "raw-cjk"])
def test_parse_call_keeps_the_arguments_text_as_written(layout: dict[str, Any]) -> None:
    arguments = {"city": "東京", "note": 'a "quoted" } and </tool_call> 🫨', "days": [1, {"x": None}]}
    written = json.dumps(arguments, **layout)
    for body in (f'{{"name": "get_weather", "arguments": {written}}}',
                 f'\n{{ "arguments" :{written} ,\n "name":"get_weather" }} '):
        parsed = lab.parse_call(body)
        assert parsed == call("get_weather", arguments), "key order and spacing do not change the call"
        assert parsed.arguments_text == written, (
            f"arguments_text must be the slice of the body the model wrote, not a re-serialisation:\n"
            f"  body     {quote(body)}\n  expected {quote(written)}\n  got      {quote(str(parsed.arguments_text))}")


@pytest.mark.task(1)
@given(written_tool_call_replies(max_calls=2))
def test_parse_call_keeps_any_arguments_text_as_written(reply: WrittenReply) -> None:
    for written in reply.calls:
        parsed = lab.parse_call(written.body)
        assert (parsed.name, parsed.arguments) == (written.name, written.arguments), (
            "parse_call must recover the name and arguments the model wrote")
        assert parsed.arguments_text == written.arguments_text, (
            f"arguments_text is not the text as written, in body {quote(written.body)}")


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
    error: Any = raised.value  # the lab's ToolCallParseError, with its raw text and reason
    assert error.raw == raw, "the error must carry the raw block, so nothing is silently lost"
    assert isinstance(raised.value, ValueError) and error.reason, (
        "ToolCallParseError is a ValueError and says why the block is malformed")
    assert f"({error.reason})" in str(error), (
        "the error's message reads 'malformed tool call (<reason>): <raw>', for the log and the client")


@pytest.mark.task(1)
def test_a_call_and_the_value_types_around_it() -> None:
    """The value types are given in the starter, and lab-02 relies on their defaults."""
    parsed = lab.parse_call('{"name": "f", "arguments": {}}')
    assert (parsed.name, parsed.arguments, parsed.arguments_text) == ("f", {}, "{}"), "a call with no arguments"
    assert lab.ToolCallDelta(3) == lab.ToolCallDelta(3, None, ""), "ToolCallDelta(index): no name, an empty fragment"
    assert lab.ParsedOutput("x").tool_calls == [] and lab.ScanState() == (0, False, False), (
        "ParsedOutput(content) has no calls; ScanState() is the start of a block, outside any string")
    step = lab.DeltaMessage()
    assert (step.content, step.tool_calls, step.tool_call_deltas) == ("", [], []), "DeltaMessage() is an empty step"


REPEATED_KEYS = {
    "arguments-twice": '{"name": "f", "arguments": 12, "arguments": {"a": 1}}',
    "name-twice": '{"name": "f", "name": "g", "arguments": {}}',
    "nested-twice": '{"name": "f", "arguments": {"a": 1, "a": 2}}',
}


@pytest.mark.task(1)
@pytest.mark.parametrize("raw", REPEATED_KEYS.values(), ids=REPEATED_KEYS.keys())
def test_a_repeated_key_is_refused(raw: str) -> None:
    """json.loads keeps the last of two equal keys, while a stream has already sent the first: refuse such a call."""
    raised: Any
    with pytest.raises(lab.ToolCallParseError) as raised:
        lab.parse_call(raw)
    assert raised.value.raw == raw, "the error carries the raw block"


# ------------------------------------------------ task 2: the end tag outside JSON strings


@pytest.mark.task(2)
@pytest.mark.parametrize(("body", "expected"), [
    ('{"a": 1}</tool_call>', 8),
    pytest.param('{"a": "</tool_call>"}</tool_call>', 21, id="tag-in-string"),  # inside a string: not the end
    pytest.param('{"a": "say \\"</tool_call>\\" ok"}</tool_call>', 32, id="escaped-quotes"),  # still inside
    ('{"a": "back\\\\"}</tool_call>', 15),  # an escaped backslash does not escape the quote
    ('{"a": 1}', None),
    ('{"a": 1}</tool_', None),  # the tag is still arriving
    pytest.param("</tool_call>", 0, id="at-the-start"),  # the very first character counts
])
def test_find_end_tag_examples(body: str, expected: int | None) -> None:
    end, _ = lab.find_end_tag(body)
    assert end == expected, f"in {quote(body)}: expected the end tag at {expected}, got {end}"


@pytest.mark.task(2)
def test_find_end_tag_stops_at_a_possible_start_of_the_tag() -> None:
    """A body cut inside its end tag: the scan stops at the "<", so resumed on the grown body it finds the tag."""
    before = '{"a": "</tool_ \\"<"}  '  # a "<" and a partial tag inside a string, then the tag itself
    body = before + "</tool_call>"
    for cut in range(len(before), len(body)):
        end, state = lab.find_end_tag(body[:cut])
        assert end is None, f"in {quote(body[:cut])} the end tag has not arrived yet: expected None, got {end}"
        found, _ = lab.find_end_tag(body, state)
        assert found == len(before), (
            f"stop *at* a '<' that may start the tag, so the next call looks at it again: find_end_tag("
            f"{quote(body[:cut])}) returned the state {tuple(state)}; resumed from it on {quote(body)}, it must "
            f"find the end tag at {len(before)}, got {found}")


@pytest.mark.task(2)
@given(st.data(), tool_call_replies(max_calls=1))
def test_find_end_tag_resumes_across_pieces(data: st.DataObject, reply: GeneratedReply) -> None:
    """Fed piece by piece with its saved state, the scanner finds the same end as on the whole body."""
    if not reply.blocks:
        return
    start, end = reply.blocks[0]
    body = reply.text[start + len("<tool_call>") :]
    whole, _ = lab.find_end_tag(body)
    assert whole == end - start - len("<tool_call>") - len("</tool_call>"), (
        "find_end_tag must find the end tag that closes the block, outside JSON strings")
    grown, state, found = "", lab.ScanState(), None
    for piece in data.draw(chunkings(body), label="pieces"):
        grown += piece
        found, state = lab.find_end_tag(grown, state)
        if found is not None:
            break
    assert found == whole, "fed in pieces, find_end_tag must find the same end as on the whole block"


# ------------------------------------------------------------ task 3: a whole reply


@pytest.mark.task(3)
def test_prose_before_between_and_after_calls_is_kept() -> None:
    text = "Checking two cities. " + block(WEATHER) + " and " + block(WEATHER, padding="\n") + " Done."
    parsed = lab.parse_tool_calls(text)
    assert parsed.content == "Checking two cities.  and  Done.", (
        "the prose around and between the calls is kept, and only it")
    assert parsed.tool_calls == [call(**WEATHER), call(**WEATHER)], "the second call must not be lost"


@pytest.mark.task(3)
def test_end_tag_inside_an_argument_does_not_close_the_call() -> None:
    tricky: dict[str, Any] = {"name": "write_file", "arguments": {"text": "close with </tool_call> then stop"}}
    parsed = lab.parse_tool_calls("ok " + block(tricky) + " after")
    assert parsed.tool_calls == [call(**tricky)] and parsed.content == "ok  after", (
        "an end tag inside an argument string does not close the call")


@pytest.mark.task(3)
@pytest.mark.parametrize("ensure_ascii", [False, True])
def test_cjk_and_emoji_arguments_survive(ensure_ascii: bool) -> None:
    wild: dict[str, Any] = {"name": "send", "arguments": {"to": "Zoë", "text": "发射 🚀🫨 «ok»",
                                                          "tags": ["日本語", "\ufffd"]}}
    parsed = lab.parse_tool_calls(block(wild, ensure_ascii=ensure_ascii))
    assert parsed.tool_calls == [call(**wild)], "arguments must come back exactly, not escaped or mangled"


@pytest.mark.task(3)
def test_false_alarms_are_prose() -> None:
    text = "Use <today> as a tag; a < b; <tool> is not a call; nor is </tool_call>."
    assert lab.parse_tool_calls(text) == lab.ParsedOutput(text, []), "text that only looks like a tag is prose"


@pytest.mark.task(3)
def test_block_left_open_at_the_end() -> None:
    complete = "Sure. <tool_call>" + json.dumps(WEATHER)  # the model stopped right after the JSON
    assert lab.parse_tool_calls(complete) == lab.ParsedOutput("Sure. ", [call(**WEATHER)]), (
        "a block left open at the end is accepted when its JSON is complete")
    with pytest.raises(lab.ToolCallParseError) as raised:
        lab.parse_tool_calls('Sure. <tool_call>{"name": "get_weather", "argu')
    assert raised.value.raw == '{"name": "get_weather", "argu', "the error carries the raw unfinished block"


@pytest.mark.task(3)
@pytest.mark.parametrize("body", ["{oops}", REPEATED_KEYS["arguments-twice"], ""],
                         ids=["not-json", "repeated-key", "empty"])
def test_malformed_block_in_a_reply_is_loud(body: str) -> None:
    with pytest.raises(lab.ToolCallParseError) as raised:
        lab.parse_tool_calls(f"before <tool_call>{body}</tool_call> after")
    assert raised.value.raw == body, "a malformed block in a reply raises, carrying its raw text"


@pytest.mark.task(3)
@given(tool_call_replies())
@example(reply=reply_from(block(WEATHER), ' the end "'))  # a quote at the very end of the reply
def test_batch_recovers_exactly_what_was_written(reply: GeneratedReply) -> None:
    parsed = lab.parse_tool_calls(reply.text)
    assert parsed.content == reply.prose, "parse_tool_calls must give back exactly the prose outside the blocks"
    assert parsed.tool_calls == [call(name, arguments) for name, arguments in reply.calls], (
        "parse_tool_calls must give back the calls that were written, in order")


# ------------------------------------------------------------ task 4: streaming, examples


@pytest.mark.task(4)
def test_content_flows_immediately() -> None:
    chunks = ["Hello", ", wor", "ld! 你好 🫨"]
    deltas, _ = stream(chunks)
    assert [d.content for d in deltas] == chunks, (
        "prose with no '<' in it is never held\n" + trace(chunks, reply_from("".join(chunks))))


@pytest.mark.task(4)
def test_a_partial_tag_is_held_not_leaked() -> None:
    reply = reply_from("Let me look that up. ", block(WEATHER))
    chunks = split_at(reply.text, [22, 26, 31, 32, len(reply.text) - 12])  # "<" "tool" "_call" ">" ...
    deltas, last = stream(chunks)
    shown = "".join(d.content for d in [*deltas, last])
    assert shown == "Let me look that up. ", "a half tag reached the user\n" + trace(chunks, reply)
    assert deltas[-1].tool_calls == [call(**WEATHER)], "the call arrives when its block closes"


@pytest.mark.task(4)
@pytest.mark.parametrize(
    "chunks", [["It is <", "today> now"], ["if a <", " b then"], ["<tool", ">x"], ["<tool_c", "all_me"]],
    ids=["today", "less-than", "tool-tag", "tool_call_me"],
)
def test_false_alarms_are_released_as_soon_as_they_cannot_be_a_tag(chunks: list[str]) -> None:
    deltas, last = stream(chunks)
    assert "".join(d.content for d in deltas) == "".join(chunks), (
        "text that cannot become '<tool_call>' any more is shown at once, not held\n"
        + trace(chunks, reply_from("".join(chunks))))
    assert last.content == "", "nothing was held at the end: finish adds no content"


@pytest.mark.task(4)
def test_two_calls_and_the_text_around_them_stream_through() -> None:
    reply = reply_from("A ", block(WEATHER), " B ", block({"name": "ping", "arguments": {}}), " C")
    content, calls = collect(list(reply.text))  # one character at a time
    assert content == "A  B  C", (
        "all the prose around two calls is shown, and only it\n" + trace(list(reply.text), reply))
    assert calls == [call(**WEATHER), call("ping", {})], "both calls come out, in order"


@pytest.mark.task(4)
@pytest.mark.parametrize("cut", [0, 20], ids=["one-delta", "tag-and-prose-together"])
def test_prose_arriving_with_an_end_tag_is_kept(cut: int) -> None:
    reply = reply_from("Before. ", block(WEATHER), " After the call, in the same delta.")
    chunks = [reply.text] if cut == 0 else [reply.text[:cut], reply.text[cut:]]
    content, calls = collect(chunks)
    assert content == "Before.  After the call, in the same delta.", (
        "prose in the same delta as an end tag is shown too\n" + trace(chunks, reply))
    assert calls == [call(**WEATHER)], "the call completed in that delta must come out whole"


@pytest.mark.task(4)
def test_end_tag_split_inside_an_argument_string() -> None:
    tricky: dict[str, Any] = {"name": "note", "arguments": {"text": "</tool_call> is just text here"}}
    chunks = split_at(block(tricky), range(3, len(block(tricky)), 5))
    content, calls = collect(chunks)
    assert calls == [call(**tricky)] and content == "", (
        "the call must survive an end tag inside its argument string, and leave no prose")


@pytest.mark.task(4)
def test_malformed_call_in_a_stream_raises_and_changes_nothing() -> None:
    parser = lab.StreamingToolParser()
    assert parser.feed("Plan: <tool_call>{not json").content == "Plan: ", "prose before a call flows at once"
    with pytest.raises(lab.ToolCallParseError) as raised:
        parser.feed("}</tool_call> more <too")
    assert raised.value.raw == "{not json}", "the error carries the raw block"
    assert parser.held_text == "", "a failed feed must leave the parser as it was"
    with pytest.raises(lab.ToolCallParseError):
        parser.feed("}</tool_call>")  # the same block is still open: still malformed, still loud


# A block that is not a call. Fed after a good call closed, in the same delta, it makes that
# delta fail after the parser has already read past the good call's end.
MALFORMED_BLOCK = '<tool_call>{"name": 5}</tool_call>'


def first_block_end(reply: GeneratedReply | WrittenReply) -> int:
    """Where the reply's first block ends (prose never holds a whole start tag, so it is the first one)."""
    if isinstance(reply, GeneratedReply):
        return reply.blocks[0][1]
    return reply.text.index("<tool_call>") + len("<tool_call>") + len(reply.calls[0].body) + len("</tool_call>")


def replay_after_a_failed_feed(reply: GeneratedReply | WrittenReply, cut: int, stream_arguments: bool
                               ) -> tuple[list[Any], str]:
    """Feed the reply up to ``cut`` in threes; then a delta that carries the rest of the first
    block and a malformed block, which must raise; then the reply from ``cut`` on, as if that
    delta had never come. Returns every message and the step-by-step story for a failure."""
    first_end = first_block_end(reply)
    parser = lab.StreamingToolParser(stream_arguments=stream_arguments)
    story = [f"fed {quote(reply.text[:cut])}"]
    messages = each(parser.feed, split_at(reply.text[:cut], range(3, cut, 3)))
    poison = reply.text[cut:first_end] + MALFORMED_BLOCK
    story.append(f"fed {quote(poison)}: must raise ToolCallParseError and change nothing")
    must_raise(lambda: parser.feed(poison), lab.ToolCallParseError, f"feed({quote(poison)})")
    story.append(f"fed {quote(reply.text[cut:])} again, then finish()")
    messages += [parser.feed(reply.text[cut:]), parser.finish()]
    return messages, "\n".join(story)


@pytest.mark.task(4)
def test_a_failed_feed_is_as_if_it_never_happened() -> None:
    ping = {"name": "ping", "arguments": {}}
    reply = reply_from("Sure <tool", "> x. ", block(WEATHER), " and ", block(ping), " ok <t")
    for cut in range(reply.blocks[0][1]):  # every point before the first block's end
        messages, story = replay_after_a_failed_feed(reply, cut, stream_arguments=False)
        content, calls = "".join(m.content for m in messages), [c for m in messages for c in m.tool_calls]
        assert (content, calls) == (reply.prose, [call(**WEATHER), call("ping", {})]), (
            "a feed that raises must leave the parser exactly as it was (held text, the open block, the "
            f"count of calls): the next good input goes on as if it never came\n{story}\n"
            f"  content expected {quote(reply.prose)}\n  content got      {quote(content)}\n"
            f"  calls got {[c.name for c in calls]}")


@pytest.mark.task(4)
@pytest.mark.parametrize("bad", [None, b"<tool_call>", 3, ["x"]], ids=repr)
def test_non_str_delta_raises_and_loses_nothing(bad: object) -> None:
    written: tuple[str, list[Any]] = ("ok <tool> fine", [])  # the oracle: the reply the good deltas carry, prose only
    parser = lab.StreamingToolParser()
    first = parser.feed("ok <tool")
    held = parser.held_text
    must_raise(lambda: parser.feed(bad), TypeError, f"feed({bad!r})")
    assert parser.held_text == held, (
        f"a rejected delta must leave the held text alone: it was {quote(held)}, now {quote(parser.held_text)}")
    second = parser.feed("> fine")
    last = parser.finish()
    got = (first.content + second.content + last.content, [*first.tool_calls, *second.tool_calls, *last.tool_calls])
    assert got == written, (
        f"a rejected delta must change nothing: the good deltas carry the prose and calls {written}, "
        f"your parser gave {got}")


@pytest.mark.task(4)
def test_fifty_random_slicings() -> None:
    note = {"name": "note", "arguments": {"text": "has </tool_call> and \"quotes\" 🫨"}}
    reply = reply_from("I'll check the weather 🌦 first. ", block(WEATHER, padding="\n"),
                       " Then a note <today>, a < b: ", block(note, ensure_ascii=True), " and done. <tool")
    size = len(reply.text)
    for seed in range(50):
        rng = random.Random(seed)
        chunks = split_at(reply.text, sorted(rng.sample(range(1, size), rng.randint(1, size // 4))))
        content, calls = collect(chunks)
        assert content == reply.prose, (
            f"seed {seed}: the prose must come out exactly as written\n" + trace(chunks, reply))
        assert calls == [call(name, arguments) for name, arguments in reply.calls], (
            f"seed {seed}: both calls must come out, in order, however the reply is cut")


# ---------------------------------------------------------- task 4: streaming, properties


@pytest.mark.task(4)
@given(st.data(), tool_call_replies())
def test_streaming_equals_batch_for_any_chunking(data: st.DataObject, reply: GeneratedReply) -> None:
    """The stream gives what was written (the prose, then the calls), the same as a correct batch parse."""
    chunks = data.draw(chunkings(reply.text), label="chunks")
    content, calls = collect(chunks)
    assert content == reply.prose, "streamed, the prose must be exactly what was written\n" + trace(chunks, reply)
    assert calls == [call(name, arguments) for name, arguments in reply.calls], (
        "streamed, the calls must be the ones written, in order, however the reply is cut")


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
        assert reply.prose.startswith(shown), (
            f"shown {quote(shown)}: not prose the model wrote\n" + trace(chunks, reply))
        view = prose_seen(reply, fed)
        if view is None:
            continue
        seen, since_last_block = view
        must_hold = next((since_last_block[i:] for i in range(len(since_last_block))
                          if "<tool_call>".startswith(since_last_block[i:])), "")
        assert (shown, parser.held_text) == (seen[: len(seen) - len(must_hold)], must_hold), (
            f"after {fed} characters: hold exactly the tail that could still become '<tool_call>', "
            f"{quote(must_hold)}, and show the rest; held {quote(parser.held_text)}\n" + trace(chunks, reply)
        )


# ------------------------------------------------------------------- task 5: finish


@pytest.mark.task(5)
def test_finish_releases_a_held_false_alarm() -> None:
    parser = lab.StreamingToolParser()
    text = "The end is <tool"
    shown = parser.feed(text).content
    last = parser.finish()
    got = (shown + last.content, last.tool_calls, parser.held_text)
    assert got == (text, [], ""), (
        f"finish must release what feed held back, as prose: the content of feed and finish together is "
        f"{quote(text)}, with no call, and nothing stays held; got {quote(got[0])} (finish gave "
        f"{quote(last.content)}), calls {last.tool_calls}, held {quote(got[2])}")


@pytest.mark.task(5)
def test_finish_accepts_a_complete_open_block_and_rejects_a_broken_one() -> None:
    _, last = stream(["Sure. <tool_call>", json.dumps(WEATHER)])
    assert last.tool_calls == [call(**WEATHER)], "finish accepts a block left open whose JSON is complete"
    parser = lab.StreamingToolParser()
    parser.feed('<tool_call>{"name": "get_wea')
    with pytest.raises(lab.ToolCallParseError) as raised:
        parser.finish()
    assert raised.value.raw == '{"name": "get_wea', "the error carries the raw unfinished block"


@pytest.mark.task(5)
def test_nothing_after_finish() -> None:
    parser = lab.StreamingToolParser()
    parser.feed("done")
    parser.finish()
    must_raise(lambda: parser.feed("more"), RuntimeError, "feed() after finish()")
    with pytest.raises((TypeError, RuntimeError)):  # either says what is wrong: the type, or the timing
        parser.feed(None)


@pytest.mark.task(5)
@pytest.mark.parametrize("reply", ["The end is <tool", "Sure. <tool_call>" + json.dumps(WEATHER)], ids=["held", "open"])
def test_finish_twice_is_refused_and_gives_nothing_again(reply: str) -> None:
    parser = lab.StreamingToolParser()
    shown = parser.feed(reply).content
    first = parser.finish()
    prose, calls = ("Sure. ", [call(**WEATHER)]) if "<tool_call>" in reply else (reply, [])  # the oracle
    assert (shown + first.content, first.tool_calls) == (prose, calls), (
        f"the first finish releases what feed held and the open call: the content of feed and finish together is "
        f"{quote(prose)} and the calls {calls}; got {quote(shown + first.content)}, {first.tool_calls}")
    assert parser.held_text == "", "after finish nothing is held any more"
    must_raise(parser.finish, RuntimeError, "a second finish() (the reply is over: the call must not come again)")


# ----------------------------------------------- task 6: stream the arguments as written
#
# The oracle: replies are rendered from known calls (written_tool_call_replies, or by hand
# below), so for every prefix of the reply the test knows whether the name has been
# written and which part of the arguments text has arrived. A reader that follows the
# JSON's nesting knows every character's owner when it arrives, so nothing may be held:
# once the name is known, each feed sends exactly the arguments text it brought.


def stream_calls(chunks: Sequence[str]) -> tuple[list[Any], list[Any]]:
    """Every DeltaMessage of a streamed reply (finish included) and all the ToolCallDeltas in order."""
    parser = lab.StreamingToolParser(stream_arguments=True)
    messages = each(parser.feed, chunks)
    messages.append(parser.finish())
    return messages, [d for m in messages for d in m.tool_call_deltas]


def shown(delta: Any) -> str:
    name = f"name={delta.name} " if delta.name is not None else ""
    return f"#{delta.index} {name}+{delta.arguments_fragment}"


def call_trace(chunks: Sequence[str], reply: WrittenReply) -> str:
    """The calls delta by delta: what each feed sent, beside what the oracle says it should send."""
    expected = oracle_steps(reply, chunks)
    parser = lab.StreamingToolParser(stream_arguments=True)
    steps = []
    for i, chunk in enumerate([*chunks, None]):
        label = "feed" if chunk is not None else "finish"
        try:
            message = parser.feed(chunk) if chunk is not None else parser.finish()
        except Exception as error:  # the trace is for a failure message: show the error in its row
            steps.append(Step(label, chunk or "", f"raised {type(error).__name__}", expected[i]))
            break
        steps.append(Step(label, chunk or "", " ".join(shown(d) for d in message.tool_call_deltas), expected[i]))
    return format_trace(steps, "the calls, delta by delta: '#0 name=f +{\"a' is call 0, its name, and the "
                               "arguments text it sends", ("sent", "expected"))


# A chunking the tests can name in an @example: chunk sizes, repeated until the text runs out.
CHUNK_SIZES = st.lists(st.integers(1, 12) | st.integers(13, 120), min_size=1, max_size=12)


def cut_by_sizes(text: str, sizes: Sequence[int]) -> list[str]:
    chunks, position, turn = [], 0, 0
    while position < len(text):
        size = sizes[turn % len(sizes)]
        chunks.append(text[position : position + size])
        position, turn = position + size, turn + 1
    return chunks


def value_spans(body: str) -> dict[str, tuple[int, int]]:
    """The oracle's own reading of a call's body: each key -> where its value starts and ends."""
    spans: dict[str, tuple[int, int]] = {}
    decoder, position = json.JSONDecoder(), body.index("{") + 1
    while True:
        position += len(body[position:]) - len(body[position:].lstrip(" \t\n\r,"))
        if body[position] == "}":
            return spans
        key, position = decoder.raw_decode(body, position)
        position += len(body[position:]) - len(body[position:].lstrip(" \t\n\r:"))
        _, end = decoder.raw_decode(body, position)
        spans[key], position = (position, end), end


def written_from(*parts: str) -> WrittenReply:
    """A reply written from prose and whole blocks, with the oracle's knowledge of each call."""
    text, prose, calls = "", [], []
    for part in parts:
        if part.startswith("<tool_call>") and part.endswith("</tool_call>"):
            body = part[len("<tool_call>") : -len("</tool_call>")]
            spans, at = value_spans(body), len(text) + len("<tool_call>")
            (name_start, name_end), (start, end) = spans["name"], spans["arguments"]
            calls.append(WrittenCall(json.loads(body[name_start:name_end]), json.loads(body[start:end]),
                                     body[start:end], at + name_end, at + start, body))
        else:
            prose.append(part)
        text += part
    return WrittenReply(text, "".join(prose), calls)


def one_call(body: str) -> WrittenReply:
    return written_from("<tool_call>" + body + "</tool_call>")


# A "}" inside a string: a brace counter that ignores strings thinks the arguments end there.
BRACE_IN_A_STRING = one_call('{"name": "f", "arguments": {"a": "}", "b": 1}}')
# Arguments ending in "}}" and then the envelope's "}": which brace belongs to whom?
BRACES_AT_THE_END = one_call('{"name": "f", "arguments": {"a": {}}}\n')
# The arguments before the name: they must wait for it.
ARGUMENTS_FIRST = one_call('{"arguments": {"x": [1, "2"]}, "name": "late"}')
# Other keys around the call's own: an empty key, a number with a space before its comma, an
# object holding "name" and "arguments" keys of its own, a string. Only the envelope's count.
EXTRA_KEYS = one_call('{"": "", "name": "f", "id": 7 , "meta": {"name": "x", "arguments": [1, {"a": "}"}]}, '
                      '"note": "a \\" b", "ok": true, "arguments": {"a": [1, 2]}\n}')
# A name written with escapes (\u005f is "_"): the name sent is the decoded one.
ESCAPED_NAME = one_call('{"name": "get\\u005fweather\\u00e9", "arguments": {"q": "\\u005f"}}')


def per_call(deltas: Sequence[Any]) -> dict[int, tuple[list[str], str]]:
    """index -> (the names its deltas carried, its fragments joined)."""
    calls: dict[int, tuple[list[str], str]] = {}
    for d in deltas:
        names, text = calls.get(d.index, ([], ""))
        calls[d.index] = ([*names, d.name] if d.name is not None else names, text + d.arguments_fragment)
    return calls


def expected_so_far(written: WrittenCall, text: str, fed: int) -> str:
    """What the oracle says call ``written`` must have sent once ``fed`` characters of ``text`` arrived."""
    if fed < written.name_end:
        return ""  # the name is not known yet: nothing may be sent, not even arguments
    return text[written.arguments_start : max(written.arguments_start, min(fed, written.arguments_end))]


def oracle_steps(reply: WrittenReply, chunks: Sequence[str]) -> list[str]:
    """The 'expected' column of a call trace: what each feed should send, from the oracle (nothing held)."""
    steps, fed, sent = [], 0, {i: "" for i in range(len(reply.calls))}
    for chunk in chunks:
        before, fed = fed, fed + len(chunk)
        parts = []
        for index, written in enumerate(reply.calls):
            now = expected_so_far(written, reply.text, fed)
            named = before < written.name_end <= fed
            if named or now != sent[index]:
                parts.append(f"#{index} " + (f"name={written.name} " if named else "") + "+" + now[len(sent[index]) :])
            sent[index] = now
        steps.append(" ".join(parts))
    return [*steps, ""]


@pytest.mark.task(6)
def test_name_is_sent_once_then_the_arguments_as_they_are_written() -> None:
    reply = written_from("Sure. ", block(WEATHER))
    chunks = list(reply.text)  # one character at a time
    _, deltas = stream_calls(chunks)
    assert deltas, "with stream_arguments=True, a call streams as ToolCallDelta objects\n" + call_trace(chunks, reply)
    first = deltas[0]
    assert (first.index, first.name) == (0, "get_weather"), (
        "the first delta names the call (index 0)\n" + call_trace(chunks, reply))
    assert all(d.name is None for d in deltas[1:]), "the name is sent once, never again\n" + call_trace(chunks, reply)
    assert "".join(d.arguments_fragment for d in deltas) == reply.calls[0].arguments_text, (
        "the fragments join to the arguments exactly as written\n" + call_trace(chunks, reply))
    assert len(deltas) > 10, "one character at a time, the arguments should arrive in many fragments"


@pytest.mark.task(6)
def test_arguments_written_before_the_name_wait_for_it() -> None:
    reply = one_call('{"arguments": {"city": "Paris"}, "name": "get_weather"}')
    chunks = split_at(reply.text, [11, 31, 51, len(reply.text) - 12])
    messages, deltas = stream_calls(chunks)
    assert not messages[1].tool_call_deltas and not messages[2].tool_call_deltas, (
        "no fragment may go out before the call has a name\n" + call_trace(chunks, reply))
    assert messages[3].tool_call_deltas == [lab.ToolCallDelta(0, "get_weather", '{"city": "Paris"}')], (
        "once the name arrives: the name and everything waiting, in one delta\n" + call_trace(chunks, reply))
    assert len(deltas) == 1, "nothing is left to send after that\n" + call_trace(chunks, reply)


@pytest.mark.task(6)
@pytest.mark.parametrize("layout", [{"separators": (",", ":")}, {"indent": 2}, {"ensure_ascii": True},
                                    {"ensure_ascii": False, "separators": (" , ", " : ")}],
                         ids=["compact", "indented", "ascii-escapes", "odd-spacing"])
def test_fragments_are_the_text_as_written_not_re_serialised(layout: dict[str, Any]) -> None:
    arguments = {"path": "メモ/旅行.md", "text": 'line "one"\n} </tool_call> \\ 🚀', "tags": [{"k": []}]}
    written = json.dumps(arguments, **layout)
    reply = written_from(f'<tool_call>\n{{"name": "write_file", "arguments": {written}}}\n</tool_call>')
    chunks = split_at(reply.text, range(5, len(reply.text), 7))
    messages, deltas = stream_calls(chunks)
    streamed = "".join(d.arguments_fragment for d in deltas)
    assert streamed == written, (f"the fragments must join to the arguments exactly as written\n"
                                 f"  expected {quote(written)}\n  got      {quote(streamed)}\n"
                                 + call_trace(chunks, reply))
    complete = [c for m in messages for c in m.tool_calls]
    assert complete == [call("write_file", arguments)] and complete[0].arguments_text == written, (
        "the complete call is still delivered, carrying the same text as the stream")
    assert json.loads(streamed) == arguments, "json.loads of the joined fragments gives the arguments back"


@pytest.mark.task(6)
@pytest.mark.parametrize("padding", ["", " ", "\n\n"], ids=["tight", "space", "newlines"])
def test_the_envelope_brace_is_never_streamed(padding: str) -> None:
    reply = one_call('{"name": "f", "arguments": {"a": {"b": 1}}' + padding + "}" + padding)
    chunks = list(reply.text)
    _, deltas = stream_calls(chunks)
    streamed = "".join(d.arguments_fragment for d in deltas)
    assert streamed == '{"a": {"b": 1}}', (
        "the last '}' closes the envelope, not the arguments: it must not be streamed\n" + call_trace(chunks, reply))


@pytest.mark.task(6)
def test_parallel_calls_are_numbered_in_order_and_never_mixed() -> None:
    first, second = {"name": "a", "arguments": {"x": "1"}}, {"name": "b", "arguments": {"y": [2, 3]}}
    reply = written_from("Two: ", block(first), " and ", block(second, padding="\n"), " done")
    chunks = split_at(reply.text, range(3, len(reply.text), 4))
    _, deltas = stream_calls(chunks)
    assert [d.index for d in deltas] == sorted(d.index for d in deltas), (
        "call 0 is finished before call 1 starts: their deltas must not interleave\n" + call_trace(chunks, reply))
    assert per_call(deltas) == {0: (["a"], '{"x": "1"}'), 1: (["b"], '{"y": [2, 3]}')}, (
        "two calls: indices 0 and 1, each named once, each with its own arguments\n" + call_trace(chunks, reply))


@pytest.mark.task(6)
@given(st.integers(1, 80), st.integers(1, 80))
@example(cut=24, step=1)  # the backslash of \u005f at the end of a delta
@example(cut=22, step=80)
def test_an_escaped_name_is_decoded_however_it_is_cut(cut: int, step: int) -> None:
    chunks = [ESCAPED_NAME.text[:cut], *split_at(ESCAPED_NAME.text[cut:], range(step, len(ESCAPED_NAME.text), step))]
    _, deltas = stream_calls([c for c in chunks if c])
    names = [d.name for d in deltas if d.name is not None]
    assert names == ["get_weathe" + "r\u00e9"], (
        f"the name is sent once, decoded (\\u005f is '_'): got {names}\n" + call_trace(chunks, ESCAPED_NAME))
    assert "".join(d.arguments_fragment for d in deltas) == '{"q": "\\u005f"}', (
        "in the arguments the escape stays as written\n" + call_trace(chunks, ESCAPED_NAME))


@pytest.mark.task(6)
def test_a_call_that_turns_out_malformed_is_still_loud() -> None:
    parser = lab.StreamingToolParser(stream_arguments=True)
    sent = parser.feed('Plan: <tool_call>{"name": "f", "arguments": {"a": 1')
    assert sent.tool_call_deltas == [lab.ToolCallDelta(0, "f", '{"a": 1')], "name and fragment go out at once"
    with pytest.raises(lab.ToolCallParseError) as raised:
        parser.feed("</tool_call> more")  # the envelope never closed: not a call
    assert raised.value.raw == '{"name": "f", "arguments": {"a": 1', "the error carries the raw block"
    more = parser.feed("}}</tool_call> after")  # the failed feed changed nothing: the block is still open
    assert more.tool_call_deltas == [lab.ToolCallDelta(0, None, "}")], "the name is not sent again after an error"
    assert more.content == " after" and more.tool_calls == [call("f", {"a": 1})], (
        "after the error, the same block completes normally")


@pytest.mark.task(6)
@pytest.mark.parametrize("body", ['{"na\\qme": "f", "arguments": {}}', '{"name": "f\\q", "arguments": {}}'],
                         ids=["bad-escape-in-a-key", "bad-escape-in-the-name"])
def test_a_malformed_call_streams_without_crashing(body: str) -> None:
    """The reader never raises: while the block is open it cannot know the call is bad. The end tag decides."""
    parser = lab.StreamingToolParser(stream_arguments=True)
    for char in "<tool_call>" + body:
        parser.feed(char)  # must not raise: nothing is known to be wrong yet
    with pytest.raises(lab.ToolCallParseError) as raised:
        parser.feed("</tool_call>")
    assert raised.value.raw == body, "at its end tag, the malformed call raises ToolCallParseError with its raw text"


@pytest.mark.task(6)
def test_a_failed_feed_does_not_lose_a_brace() -> None:
    """The lost brace (vLLM #22885): a feed closes call 0, then meets a malformed call 1 and raises."""
    parser = lab.StreamingToolParser(stream_arguments=True)
    sent = [d.arguments_fragment for d in parser.feed('<tool_call>{"name": "f", "arguments": {"x": 1').tool_call_deltas]
    with pytest.raises(lab.ToolCallParseError):
        parser.feed('}}</tool_call><tool_call>{"name": 5}</tool_call>')
    last = parser.feed("}}</tool_call>")
    sent += [d.arguments_fragment for d in last.tool_call_deltas]
    assert [c.arguments_text for c in last.tool_calls] == ['{"x": 1}'], "the same text again completes call 0"
    assert "".join(sent) == '{"x": 1}', (
        f"the fragments join to {quote(''.join(sent))}, but the call's arguments are '{{\"x\": 1}}': the failed feed "
        "must leave call 0's reader as it was, so the '}' it brought is read again when the text comes again")


@pytest.mark.task(6)
@given(written_tool_call_replies(max_calls=2), st.integers(0, 10_000))
@example(reply=written_from("a ", block({"name": "f", "arguments": {"x": 1}})), cut_at=23)
def test_a_failed_feed_leaves_the_streamed_calls_as_they_were(reply: WrittenReply, cut_at: int) -> None:
    if not reply.calls:
        return
    cut = cut_at % first_block_end(reply)  # anywhere before the end of the first block
    messages, story = replay_after_a_failed_feed(reply, cut, stream_arguments=True)
    calls = per_call([d for m in messages for d in m.tool_call_deltas])
    for index, written in enumerate(reply.calls):
        names, joined = calls.get(index, ([], ""))
        assert (names, joined) == ([written.name], written.arguments_text), (
            f"call {index}: a feed that raised must leave the call's reader as it was, so that the name still goes "
            f"out once and the fragments join to {quote(written.arguments_text)}; got the names {names} and the "
            f"fragments {quote(joined)}\n{story}")


@pytest.mark.task(6)
def test_a_repeated_key_streams_but_the_call_is_refused() -> None:
    parser = lab.StreamingToolParser(stream_arguments=True)
    raw = REPEATED_KEYS["arguments-twice"]
    with pytest.raises(lab.ToolCallParseError) as raised:
        parser.feed("<tool_call>" + raw + "</tool_call>")
    assert raised.value.raw == raw, (
        "a call with a repeated key is refused when its block closes, streamed or not: the stream could only "
        "have sent the first value, while json.loads keeps the last")


@pytest.mark.task(6)
def test_a_block_left_open_streams_like_a_closed_one() -> None:
    reply = written_from("Sure. ", block(WEATHER))
    chunks = list(reply.text[: -len("</tool_call>")])  # the model stopped right after the JSON
    messages, deltas = stream_calls(chunks)
    assert per_call(deltas) == {0: (["get_weather"], reply.calls[0].arguments_text)}, (
        "a call whose end tag never came streams exactly like one that closed\n" + call_trace(chunks, reply))
    assert messages[-1].tool_calls == [call(**WEATHER)] and not messages[-1].tool_call_deltas, (
        "finish delivers the complete call, and has nothing left to stream")


@pytest.mark.task(6)
def test_calls_stream_only_when_asked() -> None:
    quiet, streaming = lab.StreamingToolParser(), lab.StreamingToolParser(stream_arguments=True)
    quiet_out = [quiet.feed("x " + block(WEATHER)), quiet.finish()]
    streaming_out = [streaming.feed("x " + block(WEATHER)), streaming.finish()]
    assert not any(m.tool_call_deltas for m in quiet_out), "stream_arguments defaults to False: calls arrive whole"
    assert any(m.tool_call_deltas for m in streaming_out), "with stream_arguments=True the call streams"
    for out in (quiet_out, streaming_out):
        assert [c for m in out for c in m.tool_calls] == [call(**WEATHER)], "either way, the whole call arrives"


@pytest.mark.task(6)
@given(written_tool_call_replies(), CHUNK_SIZES)
@example(reply=BRACE_IN_A_STRING, sizes=[1])
@example(reply=ARGUMENTS_FIRST, sizes=[1])
@example(reply=EXTRA_KEYS, sizes=[1])
def test_streamed_calls_equal_what_was_written_for_any_chunking(reply: WrittenReply, sizes: list[int]) -> None:
    chunks = cut_by_sizes(reply.text, sizes)
    messages, deltas = stream_calls(chunks)
    calls = per_call(deltas)
    for index, written in enumerate(reply.calls):
        names, streamed = calls.get(index, ([], ""))
        assert names == [written.name], (  # (a message is only built when its assertion fails)
            f"call {index}: the name must be sent exactly once\n" + call_trace(chunks, reply))
        assert streamed == written.arguments_text, (
            f"call {index}: the fragments must join to the arguments as written\n"
            f"  expected {quote(written.arguments_text)}\n  got      {quote(streamed)}\n" + call_trace(chunks, reply))
    assert sorted(calls) == list(range(len(reply.calls))), "calls are numbered 0, 1, ... in order"
    assert [d.index for d in deltas] == sorted(d.index for d in deltas), "deltas of two calls never interleave"
    for index in calls:
        named = [i for i, d in enumerate(deltas) if d.index == index]
        assert deltas[named[0]].name is not None, f"call {index}: the name comes before any fragment"
    complete = [c for m in messages for c in m.tool_calls]
    assert [(c.name, c.arguments, c.arguments_text) for c in complete] == [
        (w.name, w.arguments, w.arguments_text) for w in reply.calls], "complete calls carry the same text"
    assert "".join(m.content for m in messages) == reply.prose, "streaming the calls changes nothing in the prose"


@pytest.mark.task(6)
@given(written_tool_call_replies(), CHUNK_SIZES)
@example(reply=BRACES_AT_THE_END, sizes=[1])
@example(reply=ARGUMENTS_FIRST, sizes=[3])
@example(reply=BRACE_IN_A_STRING, sizes=[2])
@example(reply=EXTRA_KEYS, sizes=[3])
def test_arguments_stream_as_they_are_written_and_are_never_taken_back(reply: WrittenReply, sizes: list[int]) -> None:
    chunks = cut_by_sizes(reply.text, sizes)
    parser = lab.StreamingToolParser(stream_arguments=True)
    sent: dict[int, str] = {}
    named: dict[int, int] = {}
    fed = 0
    for step, chunk in enumerate(chunks, start=1):
        for delta in parser.feed(chunk).tool_call_deltas:
            if delta.name is not None:
                named[delta.index] = named.get(delta.index, 0) + 1
            sent[delta.index] = sent.get(delta.index, "") + delta.arguments_fragment
        fed += len(chunk)
        for index, written in enumerate(reply.calls):
            due = expected_so_far(written, reply.text, fed)
            so_far = sent.get(index, "")
            where = f"after step {step} ({fed} characters), call {index}"
            assert named.get(index, 0) == (fed >= written.name_end), (
                f"{where}: the name must be sent once, as soon as its closing quote has arrived\n"
                + call_trace(chunks, reply))
            assert due.startswith(so_far), (
                f"{where}: sent {quote(so_far)}, which is not what the model wrote so far ({quote(due)}): "
                f"a fragment can never be taken back\n" + call_trace(chunks, reply))
            assert so_far == due, (
                f"{where}: holding {quote(due[len(so_far):])}; a reader that follows the nesting knows each "
                f"character of the arguments is theirs when it arrives, so nothing may wait\n"
                + call_trace(chunks, reply))


# Cost: the parser may not re-join or re-read the open block per delta. How the work is counted:
# - where the lab runs in the tests' own process (make test, LAB_SANDBOX=0): the characters handed to the
#   scanners (find_end_tag, CallReader.feed, parse_call) and to any regular expression the lab's code runs,
#   like lab-04 counts the ids passed to decode (mini_vllm/sandbox/probes.py). A plain str method such as
#   find() over the whole body cannot be counted there; don't.
# - in the grading sandbox (make lab-01, make grade, the autograder), where a count taken inside your process
#   would be your code's word: the pages the kernel hands your process fresh while a tenth of the stream runs,
#   read by the grader from /proc (RemoteLab.fresh_pages, as lab-07 does). Your process allocates every block of
#   64 KiB or more as a fresh mapping, so re-joining (or re-copying) the open block on every delta touches that
#   many pages anew each time (and the heap is given back as soon as it is free, so it is not reused unseen).
#   Each tenth after the first may touch a few pages per page of text it brings (the text is kept, in pieces,
#   and copied a few times on its way), never pages in proportion to the call so far.
# Either way the count is checked only for a parser that is right: the fragments must be the text as written.
PAGE_BYTES, CHARACTER_BYTES = 4096, 4  # a str holding an emoji stores 4 bytes per character
COPIES_ALLOWED = 8  # fresh pages per page of text a tenth brings (the reference touches 1 to 4)
SLACK_PAGES = 0.5  # per delta: a tenth's messages, sent back at once, and the parser's small objects


def long_call(size: int, name_first: bool = True) -> tuple[str, str]:
    """A reply with one call whose argument is ``size`` characters of CJK, emoji, quotes and braces."""
    pattern = 'データ {"k": [1]} 🚀 "q" \\ '
    value = (pattern * (size // len(pattern) + 1))[:size]
    arguments_text = json.dumps({"content": value}, ensure_ascii=False)
    name, arguments = '"name": "write_file"', '"arguments": ' + arguments_text
    body = "{" + (f"{name}, {arguments}" if name_first else f"{arguments}, {name}") + "}"
    return "Writing. <tool_call>" + body + "</tool_call>", arguments_text


@pytest.mark.task(6)
@pytest.mark.parametrize(("size", "chunk", "name_first"),
                         [(20_000, 1, True), (300_000, 1009, True), (20_000, 1, False)],
                         ids=["20k-by-1", "300k-by-1009", "arguments-first-20k-by-1"])
def test_cost_per_character_is_constant_inside_one_long_argument(size: int, chunk: int, name_first: bool) -> None:
    text, arguments_text = long_call(size, name_first)
    chunks = [text[i : i + chunk] for i in range(0, len(text), chunk)]
    if not isinstance(lab, ModuleType):
        check_fresh_pages_inside_one_long_argument(chunks, arguments_text)
        return
    counter = install_probe(lab, "ScanCounter")  # counts inside the module under test
    try:
        check_cost_inside_one_long_argument(counter, chunks, arguments_text)
    finally:
        counter.undo()


def check_fresh_pages_inside_one_long_argument(chunks: list[str], arguments_text: str) -> None:
    """In the grading sandbox: the fresh pages each tenth of the stream costs, read on the grader's side."""
    lab.restart()  # a fresh child: its heap as your file's import left it, the same on every run
    warm_up = lab.StreamingToolParser(stream_arguments=True)  # your code's first run is not the first tenth's cost
    each(warm_up.feed, ["Sure. <tool_call>", '{"name": "f", "arguments": {"a": "東京 🚀"}}', "</tool_call>"])
    parser = lab.StreamingToolParser(stream_arguments=True)
    tenth = max(1, len(chunks) // 10)
    streamed: list[str] = []
    for start in range(0, len(chunks), tenth):
        batch = chunks[start : start + tenth]
        before = lab.fresh_pages()
        messages = each(parser.feed, batch)
        cost = lab.fresh_pages() - before
        streamed += [d.arguments_fragment for message in messages for d in message.tool_call_deltas]
        so_far = "".join(streamed)  # the answer before the count: it only means something for a parser that is right
        assert arguments_text.startswith(so_far), (
            f"the arguments stream as fragments of the text the model wrote, never retracted: after "
            f"{start + len(batch):,} deltas the fragments join to {quote(so_far[-60:])} (its end), which is not "
            f"how the arguments {quote(arguments_text[:60])}… go on")
        if start == 0 or len(batch) < tenth:  # the first tenth (your code's first steps) and the few deltas
            continue  # left over: checked for their text, not weighed
        fed, brought = sum(map(len, chunks[: start + len(batch)])), sum(map(len, batch))
        budget = COPIES_ALLOWED * brought * CHARACTER_BYTES / PAGE_BYTES + SLACK_PAGES * len(batch)
        assert cost <= budget, (
            f"each delta must cost the same late in a long call as at its start: the tenth that ends after "
            f"{fed:,} characters brought {brought:,} characters in {len(batch):,} deltas and made the kernel hand "
            f"your process {cost:,} fresh pages ({cost / len(batch):,.2f} per delta); at most {budget:,.0f} allowed "
            f"({COPIES_ALLOWED} per page of text it brought, plus {SLACK_PAGES} per delta). Re-joining or copying "
            f"the open block (or the call so far) on every delta makes each delta cost as much as the whole call "
            f"so far: keep the block in pieces and join them once, when it closes")
    streamed += [d.arguments_fragment for d in parser.finish().tool_call_deltas]
    assert "".join(streamed) == arguments_text, "the long argument must stream exactly as written"


def check_cost_inside_one_long_argument(counter: Any, chunks: list[str], arguments_text: str) -> None:
    parser = lab.StreamingToolParser(stream_arguments=True)
    streamed, fed, deltas = [], 0, 0
    for first in range(0, len(chunks), 32):  # 32 deltas per crossing of the sandbox, then a look at the count
        batch = chunks[first : first + 32]
        streamed += [d.arguments_fragment for message in each(parser.feed, batch) for d in message.tool_call_deltas]
        so_far = "".join(streamed)  # the answer before the count: it only means something for a parser that is right
        assert arguments_text.startswith(so_far), (
            f"the arguments stream as fragments of the text the model wrote, never retracted: after "
            f"{deltas + len(batch):,} deltas the fragments join to {quote(so_far[-60:])} (its end), which is not "
            f"how the arguments {quote(arguments_text[:60])}… go on")
        fed += sum(map(len, batch))
        deltas += len(batch)
        # Checked as the stream goes: a parser that re-reads the call so far fails after a few
        # dozen deltas, instead of spending minutes on the rest of a quadratic stream.
        counts = counter.snapshot()
        scanned, budget = sum(counts.values()), 4 * fed + 16 * deltas
        assert scanned <= budget, (
            f"each character may be looked at a few times, not once per delta: after {deltas:,} deltas "
            f"({fed:,} characters fed) {scanned:,} characters had been handed to the scanners and regular "
            f"expressions ({dict(counts)}); at most {budget:,} allowed. Re-joining or re-reading the open block "
            f"(or the call so far) on every delta makes each delta cost as much as the whole call so far")
    streamed += [d.arguments_fragment for d in parser.finish().tool_call_deltas]
    counts = counter.snapshot()
    assert "".join(streamed) == arguments_text, "the long argument must stream exactly as written"
    assert counts["CallReader.feed"] >= len(arguments_text), (
        "each block's new text must go through CallReader.feed (that is how this test sees the work done)")
    scanned, budget = sum(counts.values()), 4 * fed + 16 * deltas
    assert scanned <= budget, (
        f"finish may look at what is left, not at the whole call again: {scanned:,} characters had been handed to "
        f"the scanners and regular expressions by the end ({dict(counts)}); at most {budget:,} allowed")


# -------------------------------------------------------------------------- control


@pytest.mark.control
def test_parsing_each_chunk_alone_leaks_half_a_tag() -> None:
    """The naive parser looks for a whole tag inside each chunk: '<tool' then '_call>' is just prose to it."""
    shown = ""
    for chunk in ["Let me check. <tool", "_call>", json.dumps(WEATHER), "</tool_call>"]:
        shown += chunk if "<tool_call>" not in chunk else chunk.split("<tool_call>")[0]
    assert "<tool" in shown, "the user saw the half tag"
