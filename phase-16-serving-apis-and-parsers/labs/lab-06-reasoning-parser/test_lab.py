"""Lab 06 tests: reasoning and content out of a streamed reply.

Run against your code:  make lab-06
The batch rule is checked as properties that leave one answer possible (``split_problem``),
and what must be held is read from the whole text fed so far (``must_hold``); examples are
answered by hand. No test here computes your task 1's answer, and none takes its verdict
from your code. The streaming parser is held to the same properties for any text cut in any
way, so a bug in task 1 costs task-1 points only; a table's "the rule says" column shows
your own ``split_reasoning``'s answer only where those properties accept it.
"""

from __future__ import annotations

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
from mini_vllm.testing.expect import hold_problem, must_raise
from mini_vllm.testing.strategies import (
    IMPLICIT_END_TAG_CHOICES,
    cut,
    cut_positions,
    reasoning_replies,
    split_at,
)
from mini_vllm.testing.trace import Step, format_trace, quote

lab = load_lab("lab-06")

TASKS = {
    1: "split_reasoning: the batch rule",
    2: "feed: hold back only a possible tag",
    3: "finish: the held text to the channel it was in",
}

START, END, TOOL = "<think>", "</think>", "<tool_call>"
DEFAULT_TAGS: tuple[str, ...] = (TOOL,)


# ------------------------------------------------------------------ the rule, as properties
# Nothing in this file computes split_reasoning's answer: that is task 1, and no answer ships with the
# tests. The batch rule is checked as properties that together leave exactly one answer possible.


def split_problem(text: str, starts_in_reasoning: bool, implicit: Sequence[str], got: tuple[str, str]) -> str | None:
    """Which property of the batch rule ``got`` breaks as ``split_reasoning(text, ...)``, or None.

    A reply that does not open a thought (whitespace, then ``<think>``) is all answer. Otherwise the
    thought is what follows the opening (the whole reply, when the template wrote ``<think>``) up to the
    first end tag, in which no end tag starts; ``</think>`` is consumed, an implicit end tag begins the
    answer. The answer is the rest, with each ``</think>`` the model wrote removed once (str.replace).
    """
    reasoning, content = got
    if not (isinstance(reasoning, str) and isinstance(content, str)):
        return f"split_reasoning returns two strings (reasoning, content), got {got!r}"
    setting = f"(starts_in_reasoning={starts_in_reasoning}, implicit_end_tags={tuple(implicit)})"
    opened = text if starts_in_reasoning else text.lstrip()  # the template's <think> opens it, or the model's
    if not starts_in_reasoning and not opened.startswith(START):
        if (reasoning, content) == ("", text.replace(END, "")):
            return None
        return (f"{quote(text)} does not open a thought (only whitespace may come before <think>): all of it is "
                f"the answer, with each </think> removed, {setting}; got {both(reasoning, content)}")
    body = opened if starts_in_reasoning else opened[len(START) :]
    tags = (END, *implicit)
    if not body.startswith(reasoning):
        return (f"the reasoning is the thought as written, from after <think> up to its first end tag {setting}; "
                f"{quote(reasoning)} is not how the thought {quote(body[:60])} begins")
    inside = next((tag for tag in tags if -1 < body.find(tag) < len(reasoning)), None)
    if inside is not None:
        return (f"the thought ends at its first end tag, but the reasoning {quote(reasoning)} runs past "
                f"{quote(inside)} {setting}")
    rest = body[len(reasoning) :]
    if not rest:
        if content:
            return (f"a thought that never ends is all reasoning: nothing is the answer {setting}; "
                    f"got {both(reasoning, content)}")
        return None
    ending = next((tag for tag in tags if rest.startswith(tag)), None)
    if ending is None:
        return (f"the thought ends only at an end tag ({', '.join(map(quote, tags))}), but the reasoning stops before "
                f"{quote(rest[:20])} {setting}")
    after = rest[len(END) :] if ending == END else rest  # </think> is consumed; an implicit end begins the answer
    if content != after.replace(END, ""):
        kept = "is consumed" if ending == END else "stays, it begins the answer"
        return (f"after the thought ends at {quote(ending)} (which {kept}), the answer is the rest as written with "
                f"each </think> removed once, {quote(after.replace(END, ''))}, {setting}; got {quote(content)}")
    return None


def accepted_split(text: str, starts_in_reasoning: bool, implicit: Sequence[str]) -> tuple[str, str] | None:
    """For a table's "the rule says" column: your own task-1 ``split_reasoning`` of ``text``, only when the
    rule's properties accept it (then it is the one answer the rule allows); None, "no oracle", otherwise.
    It never decides a test."""
    try:
        got = lab.split_reasoning(text, starts_in_reasoning=starts_in_reasoning, implicit_end_tags=tuple(implicit))
        answer = (got[0], got[1])
    except Exception:  # task 1 unfinished or wrong: this row has no oracle
        return None
    return answer if split_problem(text, starts_in_reasoning, implicit, answer) is None else None


def could_become(rest: str, tags: Sequence[str]) -> bool:
    """``rest`` is a proper prefix of one of ``tags``: the next chunk could complete it."""
    return any(len(rest) < len(tag) and tag.startswith(rest) for tag in tags)


def must_hold(fed: str, starts_in_reasoning: bool = False, implicit: Sequence[str] = DEFAULT_TAGS) -> str:
    """After ``fed``, exactly the suffix that could still become a tag that matters there."""
    i = 0
    if not starts_in_reasoning:
        while i < len(fed) and fed[i].isspace():
            i += 1
        if could_become(fed[i:], [START]):  # (the empty string could become anything)
            return fed  # still deciding whether a thought opens: the whitespace waits too
        if not fed.startswith(START, i):
            return _must_hold_in_content(fed, 0)
        i += len(START)
    reasoning_tags = [END, *implicit]
    for k in range(i, len(fed)):
        if fed.startswith(END, k):
            return _must_hold_in_content(fed, k + len(END))
        if any(fed.startswith(tag, k) for tag in implicit):
            return _must_hold_in_content(fed, k)
        if could_become(fed[k:], reasoning_tags):
            return fed[k:]
    return ""


def _must_hold_in_content(fed: str, k: int) -> str:
    while k < len(fed):
        if fed.startswith(END, k):
            k += len(END)
        elif could_become(fed[k:], [END]):
            return fed[k:]
        else:
            k += 1
    return ""


# ----------------------------------------------------------------------------- helpers


def parser(starts_in_reasoning: bool = False, implicit: Sequence[str] = DEFAULT_TAGS) -> Any:
    return lab.StreamingReasoningParser(starts_in_reasoning=starts_in_reasoning, implicit_end_tags=implicit)


def feed_all(chunks: Sequence[str], starts_in_reasoning: bool = False,
             implicit: Sequence[str] = DEFAULT_TAGS) -> tuple[list[Any], Any]:
    p = parser(starts_in_reasoning, implicit)
    return each(p.feed, chunks), p


def shown(deltas: Sequence[Any]) -> tuple[str, str]:
    return "".join(d.reasoning for d in deltas), "".join(d.content for d in deltas)


def both(reasoning: str, content: str) -> str:
    return f"R[{reasoning}] C[{content}]"


def trace(rule: str, chunks: Sequence[str], starts_in_reasoning: bool = False,
          implicit: Sequence[str] = DEFAULT_TAGS, with_finish: bool = False) -> str:
    """``rule`` (the sentence that broke), then the stream step by step: what the parser showed
    (R = reasoning, C = content, and what it held) against what the rule shows and holds."""
    p = parser(starts_in_reasoning, implicit)
    steps, fed = [], ""
    before: tuple[str, str] | None = ("", "")
    for chunk in chunks:
        fed += chunk
        delta = p.feed(chunk)
        held = must_hold(fed, starts_in_reasoning, implicit)
        now = accepted_split(fed[: len(fed) - len(held)], starts_in_reasoning, implicit)
        steps.append(Step("feed", chunk, both(delta.reasoning, delta.content) + f" held[{p.held_text}]",
                          _since(before, now, f" held[{held}]")))
        before = now
    if with_finish:
        last = p.finish()
        steps.append(Step("finish", "", both(last.reasoning, last.content) + f" held[{p.held_text}]",
                          _since(before, accepted_split(fed, starts_in_reasoning, implicit), " held[]")))
    setting = f"(starts_in_reasoning={starts_in_reasoning}, implicit_end_tags={tuple(implicit)})"
    return format_trace(steps, f"{rule}\n{setting}", ("shown", "the rule says"))


def _since(before: tuple[str, str] | None, now: tuple[str, str] | None, held: str) -> str | None:
    """What a step adds to each channel, from the answers before and after it (None where either is unknown)."""
    if before is None or now is None or not (now[0].startswith(before[0]) and now[1].startswith(before[1])):
        return None
    return both(now[0][len(before[0]) :], now[1][len(before[1]) :]) + held


def characters_kept(obj: Any) -> int:
    """Every character reachable from ``obj``'s attributes: all that a later feed could scan again.

    Only where the object lives in this process (``LAB_SANDBOX=0``): in the grading sandbox nothing
    the child says about its own objects is believed, and the test measures its memory instead.
    """
    return int(install_probe(lab, "Introspection").characters_kept(obj))


# ------------------------------------------------------------- task 1: the batch rule


@pytest.mark.task(1)
@pytest.mark.parametrize(("text", "starts", "expected"), [
    ("<think>\nLet me add 2 and 2.\n</think>\n\nIt is 4.", False, ("\nLet me add 2 and 2.\n", "\n\nIt is 4.")),
    ("\n  <think>hm</think>ok", False, ("hm", "ok")),  # leading whitespace and the tag: neither channel
    ("Just an answer.", False, ("", "Just an answer.")),
    ("An answer that mentions <think> later.", False, ("", "An answer that mentions <think> later.")),
    ("<thinking about it>", False, ("", "<thinking about it>")),  # not the tag: a false alarm
    ("  plain, after spaces", False, ("", "  plain, after spaces")),  # no opening: the spaces are content
    ("still thinking</think>the answer", True, ("still thinking", "the answer")),  # the template wrote <think>
    ("<think>a thought cut short", False, ("a thought cut short", "")),
    ("thinking, all of it", True, ("thinking, all of it", "")),
    ("<think>I need the weather<tool_call>{}</tool_call>", False, ("I need the weather", "<tool_call>{}</tool_call>")),
    ("<think>a</think>b</think>c</think>", False, ("a", "bc")),  # duplicated end tags are removed
    ("<think>x</think>see <think> and <thinking> and a </b>", False, ("x", "see <think> and <thinking> and a </b>")),
    ("<think></think>", False, ("", "")),
    ("An answer</think> with a stray end tag", False, ("", "An answer with a stray end tag")),
    ("", False, ("", "")),
    ("", True, ("", "")),
], ids=["qwen3", "leading-whitespace", "no-thinking", "late-think-is-content", "thinking-is-not-think",
        "spaces-then-text", "starts-in-reasoning", "cut-short", "starts-in-reasoning-no-end", "implicit-end",
        "duplicated-end", "only-end-tags-removed", "empty-thought", "stray-end-without-thought", "empty",
        "empty-in-reasoning"])
def test_split_reasoning_examples(text: str, starts: bool, expected: tuple[str, str]) -> None:
    assert split_problem(text, starts, DEFAULT_TAGS, expected) is None, "the test's own table breaks the rule"
    got = lab.split_reasoning(text, starts_in_reasoning=starts)
    assert tuple(got) == expected, f"split_reasoning({quote(text)}, starts_in_reasoning={starts}): got {got}, " \
                                   f"the rule says {expected}"


@pytest.mark.task(1)
def test_implicit_end_tags_can_be_chosen() -> None:
    text = "<think>plan<|tool|>call<tool_call>"
    assert tuple(lab.split_reasoning(text, implicit_end_tags=("<|tool|>",))) == ("plan", "<|tool|>call<tool_call>"), \
        "implicit_end_tags=('<|tool|>',): that tag ends the thought, and <tool_call> is no longer special"
    assert tuple(lab.split_reasoning(text, implicit_end_tags=())) == ("plan<|tool|>call<tool_call>", ""), \
        "with no implicit end tags, only </think> ends a thought"


# Each bad tag list, the error, and a word its message must hold (so the error says what was wrong).
BAD_TAGS = {"empty": ([""], ValueError, "empty"), "int": ([3], TypeError, "3"),
            "end-tag": (["</think>"], ValueError, "</think>"), "nested": (["<a", "x<a>"], ValueError, "x<a>"),
            # </think> as the lab's own constant, and built at run time: equal strings, so the same verdict
            "end-tag-constant": ([lab.END_TAG], ValueError, "</think>"),
            "end-tag-built": (["".join(["</", "think", ">"])], ValueError, "</think>"),
            "not-a-list": (7, TypeError, "int"), "a-set": ({"<tool_call>"}, TypeError, "set")}


@pytest.mark.task(1)
@pytest.mark.parametrize(("tags", "error", "named"), BAD_TAGS.values(), ids=BAD_TAGS.keys())
def test_split_reasoning_rejects_bad_tags(tags: object, error: type[Exception], named: str) -> None:
    raised = must_raise(lambda: lab.split_reasoning("<think>x", implicit_end_tags=tags), error,
                        f"split_reasoning(..., implicit_end_tags={tags!r})")
    assert named in str(raised), f"the error should say what was wrong ({named!r}): {raised}"


@pytest.mark.task(1)
def test_split_reasoning_defaults() -> None:
    """The README's defaults: no thought unless the reply opens one, and <tool_call> ends a thought."""
    got = lab.split_reasoning("plan</think>answer")
    assert tuple(got) == ("", "plananswer"), (
        f"by default (starts_in_reasoning=False) a reply without <think> is all answer: got {got}")
    got = lab.split_reasoning("<think>plan<tool_call>{}")
    assert tuple(got) == ("plan", "<tool_call>{}"), (
        f"by default <tool_call> is an implicit end tag: it ends the thought and starts the answer; got {got}")


@pytest.mark.task(1)
def test_removing_an_end_tag_is_one_pass() -> None:
    """Removing the model's </think> can join the text around it into a new one: that one stays, as written."""
    for text, answer in [("answer </thi</think>nk> end", ("", "answer </think> end")),
                         ("<think>x</think>answer </thi</think>nk> end", ("x", "answer </think> end"))]:
        expected = answer
        assert split_problem(text, False, DEFAULT_TAGS, expected) is None, "the test's own answer breaks the rule"
        got = lab.split_reasoning(text)
        assert tuple(got) == expected, (f"split_reasoning({quote(text)}) = {got}: remove each </think> the model "
                                        f"wrote, in one pass, and nothing else; the rule says {expected}")


@pytest.mark.task(1)
@given(reasoning_replies(), st.booleans(), st.sampled_from(IMPLICIT_END_TAG_CHOICES))
@example("<think>a</think>b <thinking> c", False, DEFAULT_TAGS)
@example("<think>plan<tool_call>{}</tool_call>", False, DEFAULT_TAGS)
@example("<think>a</think>b</think>c</think>d", False, DEFAULT_TAGS)  # every further </think> is removed
@example("a</think>b</think>c", True, ())
@example("x</think>y", False, DEFAULT_TAGS)  # a stray end tag with no thought
def test_split_reasoning_follows_the_rule_for_any_text(text: str, starts: bool, implicit: tuple[str, ...]) -> None:
    got = lab.split_reasoning(text, starts_in_reasoning=starts, implicit_end_tags=implicit)
    problem = split_problem(text, starts, implicit, tuple(got) if isinstance(got, (tuple, list)) else got)
    assert problem is None, f"{problem}: split_reasoning({quote(text)}) = {got}"


# ------------------------------------------------------------ task 2: feed, examples


@pytest.mark.task(2)
def test_a_split_open_tag_is_not_leaked() -> None:
    chunks = ["<thi", "nk>Hmm.</think>Yes."]
    p = parser()
    first = p.feed(chunks[0])
    assert (first.reasoning, first.content, p.held_text) == ("", "", "<thi"), \
        trace("'<thi' could still become <think>: hold it", chunks)
    second = p.feed(chunks[1])
    assert (second.reasoning, second.content) == ("Hmm.", "Yes."), trace(
        "'nk>' completes <think>: the tag is in neither channel, then the thought, '</think>' and the answer", chunks)


@pytest.mark.task(2)
def test_a_split_end_tag_is_not_leaked() -> None:
    chunks = ["<think>plan</thi", "nk>answer"]
    deltas, _ = feed_all(chunks)
    assert [(d.reasoning, d.content) for d in deltas] == [("plan", ""), ("", "answer")], \
        trace("'</thi' must be held, then consumed: it is in neither channel", chunks)


@pytest.mark.task(2)
def test_qwen3_reply_one_character_at_a_time() -> None:
    text = "<think>\nThe user wants 2 + 2. 東京 🫨\n</think>\n\nThe answer is 4."
    chunks = list(text)
    deltas, _ = feed_all(chunks)
    assert shown(deltas) == ("\nThe user wants 2 + 2. 東京 🫨\n", "\n\nThe answer is 4."), trace(
        "one character at a time: each goes to its channel as soon as no tag can claim it", chunks)


@pytest.mark.task(2)
def test_starts_in_reasoning_when_the_template_wrote_think() -> None:
    chunks = ["The prompt ended with <think>, so", " this is thought.", "</think>", "\n\nAnswer."]
    deltas, _ = feed_all(chunks, starts_in_reasoning=True)
    assert [d.reasoning for d in deltas[:2]] == chunks[:2], \
        trace("a thought is shown as it arrives", chunks, True)
    assert shown(deltas) == ("".join(chunks[:2]), "\n\nAnswer."), trace(
        "starts_in_reasoning: the reply is thought up to '</think>', the answer after it", chunks, True)


@pytest.mark.task(2)
def test_implicit_end_at_a_tool_call() -> None:
    chunks = ["<think>I need the weather. ", "<tool_c", 'all>{"name": "get_weather"}']
    deltas, p = feed_all(chunks)
    assert shown(deltas) == ("I need the weather. ", '<tool_call>{"name": "get_weather"}'), \
        trace("the tool call ends the thought and stays, for the tool parser", chunks)
    assert not p.in_reasoning, "after an implicit end tag the parser is in the answer: in_reasoning must be False"


@pytest.mark.task(2)
def test_a_duplicated_end_tag_never_reaches_the_user() -> None:
    chunks = ["<think>a</think>The answer.</th", "ink> Really."]
    deltas, _ = feed_all(chunks)
    assert [d.content for d in deltas] == ["The answer.", " Really."], trace(
        "a second '</think>', even split across chunks, is removed from the answer", chunks)


@pytest.mark.task(2)
@pytest.mark.parametrize(("chunks", "starts"), [
    (["<thinking about it", " more"], False),
    (["<think>so a </b> is", " just text"], False),
    (["<think>x <tool", "s> y"], False),
    (["answer </b> and </thinking"], False),
    (["<think>a</think>b </th", "e end"], False),
], ids=["thinking", "b-tag", "tools", "content-near-miss", "content-false-end"])
def test_false_alarms_are_released_at_once(chunks: list[str], starts: bool) -> None:
    fed, p = "", parser(starts)
    for chunk in chunks:
        fed += chunk
        p.feed(chunk)
        must = must_hold(fed, starts)
        assert p.held_text == must, trace(hold_problem(fed, p.held_text, must, "a tag"), chunks, starts)


@pytest.mark.task(2)
def test_whitespace_before_the_opening_waits_for_the_decision() -> None:
    thought_chunks = ["\n ", "<think>", "idea"]
    deltas, _ = feed_all(thought_chunks)
    assert shown(deltas) == ("idea", ""), trace("the whitespace before <think> belongs to neither channel",
                                                thought_chunks)
    answer_chunks = ["\n ", "Hi"]
    deltas, _ = feed_all(answer_chunks)
    reasoning, content = shown(deltas)
    if not content.startswith("\n "):
        rule = "no thought opened: the whitespace that waited for the decision is the answer's, shown with 'Hi'"
    else:
        rule = "'Hi' cannot start <think>: once it arrives, the whole reply is the answer, shown at once"
    assert (reasoning, content) == ("", "\n Hi"), trace(rule, answer_chunks)


@pytest.mark.task(2)
def test_in_reasoning_follows_the_reply() -> None:
    p = parser()
    states = []
    for chunk in ["  ", "<think>", "hmm", "</think>", "ok"]:
        p.feed(chunk)
        states.append(p.in_reasoning)
    assert states == [False, True, True, False, False], f"in_reasoning after each chunk: {states}"
    assert parser(starts_in_reasoning=True).in_reasoning, "starts_in_reasoning: inside a thought from the start"


@pytest.mark.task(2)
@pytest.mark.parametrize("bad", [None, b"<think>", 7, ["</think>"]], ids=repr)
def test_non_str_chunk_raises_and_changes_nothing(bad: object) -> None:
    p, twin = parser(), parser()  # the twin gets only the good chunks
    p.feed("<think>plan </thi")
    twin.feed("<think>plan </thi")
    before = (p.held_text, p.in_reasoning)
    raised = must_raise(lambda: p.feed(bad), TypeError, f"feed({bad!r})")
    assert type(bad).__name__ in str(raised), f"the error should say what was wrong ({type(bad).__name__}): {raised}"
    assert (p.held_text, p.in_reasoning) == before, "a rejected chunk must leave the parser as it was"
    assert p.feed("nk>done") == twin.feed("nk>done"), "the next good chunk works as if the bad one never came"


@pytest.mark.task(2)
@pytest.mark.parametrize(("tags", "error", "named"), BAD_TAGS.values(), ids=BAD_TAGS.keys())
def test_parser_rejects_bad_tags(tags: object, error: type[Exception], named: str) -> None:
    raised = must_raise(lambda: lab.StreamingReasoningParser(implicit_end_tags=tags), error,
                        f"StreamingReasoningParser(implicit_end_tags={tags!r})")
    assert named in str(raised), f"the error should say what was wrong ({named!r}): {raised}"


@pytest.mark.task(2)
def test_parser_defaults() -> None:
    """The README's defaults, with no arguments at all."""
    p = lab.StreamingReasoningParser()
    delta = p.feed("plan, then the answer")
    assert (delta.reasoning, delta.content, p.in_reasoning) == ("", "plan, then the answer", False), (
        "by default (starts_in_reasoning=False) a reply that does not open <think> is the answer: got "
        f"{both(delta.reasoning, delta.content)}, in_reasoning={p.in_reasoning}")
    p = lab.StreamingReasoningParser()
    deltas = each(p.feed, ["<think>plan", "<tool_call>{}"])
    assert shown(deltas) == ("plan", "<tool_call>{}"), (
        f"by default <tool_call> is an implicit end tag: it ends the thought; got {both(*shown(deltas))}")


@pytest.mark.task(2)
def test_a_tag_that_repeats_its_own_start() -> None:
    """In '[[tool]]', '[' and '[[' are both starts of the tag: after '[[' hold both brackets, not one."""
    tags = ("[[tool]]",)
    chunks = ["<think>plan [[", "tool]] {}"]
    p, fed = parser(implicit=tags), ""
    for chunk in chunks:
        fed += chunk
        p.feed(chunk)
        must = must_hold(fed, implicit=tags)
        assert p.held_text == must, trace(hold_problem(fed, p.held_text, must, "a tag")
                                          + " (look for the LONGEST suffix that starts a tag)", chunks, implicit=tags)


@pytest.mark.task(2)
def test_removing_an_end_tag_is_one_pass_streamed() -> None:
    """However 'answer </thi</think>nk> end' is cut, the answer is 'answer </think> end'."""
    text = "answer </thi</think>nk> end"
    for chunks in [list(text), *([text[:k], text[k:]] for k in range(1, len(text)))]:
        deltas, p = feed_all(chunks)
        r, c = shown(deltas)
        assert (r, c + p.held_text) == ("", "answer </think> end"), trace(
            "remove each </think> the model wrote, once: the text it joins is the model's, shown as written", chunks)


@pytest.mark.task(2)
def test_bad_input_after_finish_is_still_named() -> None:
    p = parser()
    p.feed("<think>done")
    p.finish()
    raised = must_raise(lambda: p.feed(None), TypeError, "feed(None) after finish()")
    assert "NoneType" in str(raised), f"feed(None) is bad input whenever it comes: name it in the error: {raised}"


@pytest.mark.task(2)
def test_fifty_random_slicings() -> None:
    text = ("  <think>\nNear misses: <thinking>, a </b>, </thi, <tool, 你好 🫨 and </think\n</think>\n\n"
            "The answer, with a stray </think> removed and <think> kept. <tool_call>{} ends in </th")
    expected = ("\nNear misses: <thinking>, a </b>, </thi, <tool, 你好 🫨 and </think\n",  # written by hand
                "\n\nThe answer, with a stray  removed and <think> kept. <tool_call>{} ends in </th")
    assert split_problem(text, False, DEFAULT_TAGS, expected) is None, "the test's own answer breaks the rule"
    for seed in range(50):
        rng = random.Random(seed)
        chunks = split_at(text, sorted(rng.sample(range(1, len(text)), rng.randint(1, len(text) // 3))))
        deltas, p = feed_all(chunks)
        r, c = shown(deltas)
        assert (r, c + p.held_text) == expected, trace(
            f"slicing {seed} of 50: every cut must give the batch answer, reasoning {quote(expected[0])} and "
            f"content {quote(expected[1])}", chunks)


@pytest.mark.task(2)
@pytest.mark.parametrize("chunk_size", [1, 16])
def test_cost_per_character_does_not_grow(chunk_size: int) -> None:
    """Count what the parser keeps between feeds: a feed can only re-scan what was kept."""
    reply = "<think>" + "plan </thi x <tool y </ " * 2000 + "</think>" + "answer </th z </b> " * 2000
    if isinstance(lab, ModuleType):  # here: count what the parser's attributes hold
        p = parser()
        starts = range(0, len(reply), chunk_size)
        for first in range(0, len(starts), 97):  # 97 feeds at a time, then a look
            each(p.feed, [reply[start : start + chunk_size] for start in starts[first : first + 97]])
            start = starts[min(first + 97, len(starts)) - 1]
            kept = characters_kept(p)  # checked as it goes, so a parser that keeps the history fails fast
            assert kept <= 200, (f"after feeding {start + chunk_size:,} characters the parser keeps {kept:,}: "
                                 "keep only the ambiguous suffix and the tags, never the history")
        return
    # In the grading sandbox: the same rule, measured from outside. A parser that keeps the history
    # holds every character fed; the kernel's figure for the grading process's memory shows it. It is
    # counted from before the file was imported, so memory set aside early and given back later hides nothing.
    lab.restart()
    p = parser()
    each(p.feed, [reply[start : start + chunk_size] for start in range(0, 4000, chunk_size)])
    reasoning, content = "plan </thi x <tool y </ " * 2730, "answer </th z </b> " * 3450  # 64 KiB each
    fed = 0
    for part, times in ((reasoning, 96), ("</think>", 1), (content, 96)):  # 12 MiB in all
        for _ in range(0, times, 4):
            each(p.feed, [part] * min(4, times))
            fed += min(4, times) * len(part)
            held = lab.memory_in_use()
            assert held <= 6 * 2**20, (
                f"after feeding {fed:,} more characters the grading process holds {held / 2**20:.1f} MiB more than "
                "before your file was imported (the kernel's count; 6 MiB allowed): keep only the ambiguous suffix "
                "and the tags, never the history")


# ---------------------------------------------------------- task 2: feed, properties


@pytest.mark.task(2)
@given(reasoning_replies(), cut_positions(), st.booleans(), st.sampled_from(IMPLICIT_END_TAG_CHOICES))
@example("<think>plan</think>answer", {13}, False, DEFAULT_TAGS)
@example("<thi" + "nk>a</think>b", {4}, False, DEFAULT_TAGS)
@example("<think>a <thinking> b</think>c <thinking> d", {9, 30}, False, DEFAULT_TAGS)
@example("<think>I need a tool<tool_call>{}", {20}, False, DEFAULT_TAGS)
def test_streaming_equals_batch_for_any_chunking(text: str, positions: set[int], starts: bool,
                                                 implicit: tuple[str, ...]) -> None:
    chunks = cut(text, positions)
    deltas, p = feed_all(chunks, starts, implicit)
    r, c = shown(deltas)
    held = p.held_text
    problems = [split_problem(text, starts, implicit, whole) for whole in ((r + held, c), (r, c + held))]
    assert None in problems, trace(
        f"however the reply is cut, shown + held after the last chunk must be the batch answer, and "
        f"{both(r, c)} held[{held}] is not: {problems[0]}", chunks, starts, implicit)


@pytest.mark.task(2)
@given(reasoning_replies(), cut_positions(), st.booleans(), st.sampled_from(IMPLICIT_END_TAG_CHOICES))
@example("<think>plan and more plan", {10}, False, DEFAULT_TAGS)  # nothing ambiguous: hold nothing
@example("<think>a</think>see <thinking> b", {22}, False, DEFAULT_TAGS)
@example("answer", set(), True, DEFAULT_TAGS)
@example("<think>plan <|<|", {12}, False, ("<|<|tool|>",))  # a tag that repeats its own start
def test_held_text_is_exactly_the_ambiguous_suffix(text: str, positions: set[int], starts: bool,
                                                   implicit: tuple[str, ...]) -> None:
    chunks = cut(text, positions)
    p, fed, r, c = parser(starts, implicit), "", "", ""
    for chunk in chunks:
        fed += chunk
        delta = p.feed(chunk)
        r, c = r + delta.reasoning, c + delta.content
        held = must_hold(fed, starts, implicit)
        assert p.held_text == held, trace(hold_problem(fed, p.held_text, held, "a tag"), chunks, starts, implicit)
        problem = split_problem(fed[: len(fed) - len(held)], starts, implicit, (r, c))
        assert problem is None, (f"after {quote(fed)} everything but the held suffix is decided, and must be shown as "
                                 f"the rule splits it: shown {both(r, c)}, but {problem}\n"
                                 + trace("the stream, chunk by chunk", chunks, starts, implicit))


# -------------------------------------------------------------------- task 3: finish


def finish_releases_held(p: Any) -> tuple[Any, str]:
    """Finish ``p``; check the held text went to the channel the parser was in, and return the delta."""
    held, in_reasoning = p.held_text, p.in_reasoning
    last = p.finish()
    expected = (held, "") if in_reasoning else ("", held)
    where = "reasoning" if in_reasoning else "content"
    assert (last.reasoning, last.content) == expected, \
        f"finish() must release the held {quote(held)} into {where}, got {both(last.reasoning, last.content)}"
    return last, held


@pytest.mark.task(3)
def test_a_thought_cut_short_stays_a_thought() -> None:
    p = parser()
    p.feed("<think>I was about to close </thi")
    last, _ = finish_releases_held(p)
    assert last.content == "", "max_tokens ended the reply inside a thought: nothing of it is the answer"


@pytest.mark.task(3)
@pytest.mark.parametrize(("chunks", "starts"), [
    (["  <thi"], False),  # undecided: the answer's
    (["<think>x</think>answer </th"], False),  # a partial duplicate end tag in the answer
    (["plan <tool_c"], True),  # a partial implicit end inside a thought
    (["\n\n"], False),  # only whitespace
], ids=["undecided", "content", "reasoning", "whitespace"])
def test_finish_releases_the_held_text_into_its_channel(chunks: list[str], starts: bool) -> None:
    _, p = feed_all(chunks, starts)
    finish_releases_held(p)
    assert p.held_text == "", "after finish() nothing is held"


@pytest.mark.task(3)
@given(reasoning_replies(), cut_positions(), st.booleans(), st.sampled_from(IMPLICIT_END_TAG_CHOICES))
@example("<think>cut </thi", {5}, False, DEFAULT_TAGS)
@example("thought <tool", set(), True, DEFAULT_TAGS)
def test_finish_releases_held_text_for_any_stream(text: str, positions: set[int], starts: bool,
                                                  implicit: tuple[str, ...]) -> None:
    _, p = feed_all(cut(text, positions), starts, implicit)
    finish_releases_held(p)


@pytest.mark.task(3)
def test_nothing_after_finish() -> None:
    p = parser()
    p.feed("<think>done")
    p.finish()
    must_raise(lambda: p.feed("more"), RuntimeError, "feed() after finish() (the reply is over)")
    must_raise(p.finish, RuntimeError, "a second finish() (the reply is over)")


# -------------------------------------------------------------------------- control


@pytest.mark.control
def test_splitting_each_chunk_on_the_end_tag_leaks_it() -> None:
    """The naive parser looks for '</think>' inside each chunk: '</thi' + 'nk>' walks right past it."""
    reasoning, content, thinking = "", "", True
    for chunk in ["<think>plan</thi", "nk>answer"]:
        chunk = chunk.removeprefix("<think>")
        if thinking and "</think>" in chunk:
            before, after = chunk.split("</think>", 1)
            reasoning, content, thinking = reasoning + before, content + after, False
        elif thinking:
            reasoning += chunk
        else:
            content += chunk
    assert reasoning == "plan</think>answer" and content == "", "the tag and the answer leaked into the thought"
