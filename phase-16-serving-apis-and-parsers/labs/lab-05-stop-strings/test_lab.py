"""Lab 05 tests: stop strings over streamed text.

Run against your code:  make lab-05
The batch rule is checked as properties that leave one answer possible (``stop_problem``),
examples are answered by hand, and what must be held is the longest suffix that could still
become a stop, read from the whole text fed so far: no test here computes your task 1's
answer, and none takes its verdict from your code. A stream is held to the same properties,
so a bug in task 1 costs task-1 points only; a table's expected column at the stop shows
your own ``truncate_at_stop``'s answer only where those properties accept it. Feed tests
never call ``flush`` and flush tests never depend on how much ``feed`` held back.
"""

from __future__ import annotations

import functools
import itertools
import random
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from mini_vllm import ByteTokenizer
from mini_vllm.labs import load_lab
from mini_vllm.sandbox import each
from mini_vllm.sandbox.served import placeholder
from mini_vllm.testing.expect import hold_problem, must_raise
from mini_vllm.testing.strategies import cut_points, split_at
from mini_vllm.testing.trace import Step, format_trace, quote

lab = load_lab("lab-05")

TASKS = {
    1: "truncate_at_stop: the batch rule",
    2: "feed: hold back only a possible stop",
    3: "flush: release the tail at the end",
}


# ------------------------------------------------------------------ the rule, as properties
# Nothing in this file computes truncate_at_stop's answer: that is task 1, and no answer ships with the
# tests. The rule is checked as properties that together leave exactly one answer possible, and a stream
# is checked against the same properties, so a bug in task 1 costs points in task 1 only.


def stop_problem(text: str, stops: Sequence[str], include: bool, got: tuple[str, str | None]) -> str | None:
    """Which property of the batch rule ``got`` breaks as ``truncate_at_stop(text, stops, include)``, or None.

    With no stop in the text, the answer is the whole text and no stop. Otherwise it names a stop that
    occurs and cuts the text before it (after it, when included); no stop ends before that one does,
    and no longer stop ends at the same place (it would start earlier). One answer has all of these.
    """
    shown, reason = got
    setting = f"in {quote(text)} with stops {show_stops(stops)}" + (", stop included" if include else "")
    occurring = [s for s in stops if s in text]
    if not occurring:
        if (shown, reason) == (text, None):
            return None
        return f"no stop occurs {setting}: the answer is the whole text and no stop, got ({quote(shown)}, {reason!r})"
    if not isinstance(reason, str) or reason not in stops:
        return (f"{quote(occurring[0])} occurs {setting}: the reply stops, and the stop reason is the stop that ends "
                f"first; got stop {reason!r}")
    cut = shown if include else shown + reason
    if not isinstance(shown, str) or not text.startswith(cut) or not cut.endswith(reason):
        where = "the text up to and including the stop" if include else "the text before the stop"
        return f"the answer with stop {quote(reason)} is {where}, as written {setting}; got {quote(str(shown))}"
    end = len(cut)
    earlier = next((s for s in stops if s in text[: end - 1]), None)
    if earlier is not None:
        return (f"{quote(earlier)} ends at {text.find(earlier) + len(earlier)}, before {quote(reason)} ends at {end} "
                f"{setting}: the first stop is the one whose occurrence ends earliest, whatever the list order")
    longer = next((s for s in stops if len(s) > len(reason) and cut.endswith(s)), None)
    if longer is not None:
        return (f"{quote(longer)} and {quote(reason)} both end at {end} {setting}: of stops ending together the one "
                "that starts earliest (the longer) wins")
    return None


def longest_partial_stop(text: str, stops: Sequence[str]) -> str:
    """The longest suffix of ``text`` that is a proper prefix of some stop: what must be held."""
    return next((text[start:] for start in range(len(text)) if any(
        len(text) - start < len(s) and s.startswith(text[start:]) for s in stops)), "")


def due_by_now(fed: str, stops: Sequence[str], include: bool = False) -> str | None:
    """Everything a perfect checker has shown after ``fed`` while no stop occurs in it (before any flush):
    all but the part that could still become a stop. None once a stop occurs: then the stream has stopped,
    and what it showed is the batch answer of ``fed``, checked by :func:`stop_problem`."""
    if any(s in fed for s in stops):
        return None
    return fed if include else fed[: len(fed) - len(longest_partial_stop(fed, stops))]


def stream_problem(fed: str, stops: Sequence[str], include: bool, shown: str, checker: Any) -> str | None:
    """Which rule the stream breaks after being fed ``fed`` (no flush), having shown ``shown``, or None."""
    due = due_by_now(fed, stops, include)
    if due is None:
        if not checker.stopped:
            return f"a stop occurs in what was fed, {quote(fed)}: the checker must have stopped (stopped=True)"
        return stop_problem(fed, stops, include, (shown, checker.stop_reason))
    if checker.stopped:
        return f"no stop occurs in what was fed, {quote(fed)}, yet the checker stopped ({checker.stop_reason!r})"
    if shown != due:
        return f"after {quote(fed)} the text shown must be {quote(due)}, all but what could still become a stop"
    return None


def stopped_answer(fed: str, stops: Sequence[str], include: bool) -> str | None:
    """For a table's expected column once a stop occurs in ``fed``: the text shown by then, which is the
    batch answer, taken from your own task-1 ``truncate_at_stop`` only when the rule's properties accept it
    (then it is the one answer the rule allows); None, "no oracle", when they do not. Your task-1 function
    never decides a task-2 test."""
    try:
        got = lab.truncate_at_stop(fed, list(stops), include)
        answer = (got[0], got[1])
    except Exception:  # task 1 unfinished or wrong: this row has no oracle
        return None
    return answer[0] if stop_problem(fed, stops, include, answer) is None else None


# ----------------------------------------------------------------------------- helpers


def feed_all(chunks: Sequence[str], stops: Sequence[str], include: bool = False) -> tuple[list[str], Any]:
    """Feed every chunk (no flush: that is task 3); return what each feed showed, and the checker."""
    checker = lab.StopStringChecker(list(stops), include_stop_str_in_output=include)
    return each(checker.feed, chunks), checker


def feed_trace(chunks: Sequence[str], stops: Sequence[str], include: bool = False) -> list[Step]:
    """Each feed beside what the rule shows at that step (for a failure's table: a new checker, the same chunks)."""
    checker = lab.StopStringChecker(list(stops), include_stop_str_in_output=include)
    before: str | None
    answer: str | None
    steps, fed, before, answer = [], "", "", ""
    stopped_at: str | None = None  # the fed text in which a stop first occurs
    for chunk in chunks:
        fed += chunk
        emitted = checker.feed(chunk)
        now = due_by_now(fed, stops, include)
        if now is None:
            if stopped_at is None:
                stopped_at, answer = fed, stopped_answer(fed, stops, include)
            now = answer  # a stop that occurred stays the first one: the answer does not change after it
        due = now[len(before) :] if before is not None and now is not None and now.startswith(before) else None
        steps.append(Step("feed", chunk, emitted, due))
        before = now
    return steps


def check_feeds(chunks: Sequence[str], stops: Sequence[str], rule: str, include: bool = False) -> None:
    """After every feed the stream shows exactly what the rule allows; ``rule`` says which rule the test is about."""
    checker = lab.StopStringChecker(list(stops), include_stop_str_in_output=include)
    fed = shown = ""
    for chunk in chunks:
        fed += chunk
        shown += checker.feed(chunk)
        problem = stream_problem(fed, stops, include, shown, checker)
        if problem is not None:
            setting = f"stops {show_stops(stops)}" + (", include_stop_str_in_output" if include else "")
            pytest.fail(format_trace(feed_trace(chunks, stops, include), f"{rule} ({setting}): {problem}"))


def fed_stream_problem(chunks: Sequence[str], stops: Sequence[str], shown: Sequence[str], checker: Any) -> str | None:
    """:func:`stream_problem` after every feed, from what each feed showed (:func:`feed_all`) and the checker's
    state at the end: before a stop occurs, each step's total against :func:`due_by_now`; once one occurs, the
    whole output (nothing may follow the stop) against the batch rule's properties."""
    fed = total = ""
    for chunk, piece in zip(chunks, shown, strict=True):
        fed, total = fed + chunk, total + piece
        if due_by_now(fed, stops) is None:
            return stream_problem(fed, stops, False, "".join(shown), checker)
        if total != due_by_now(fed, stops):
            due: Any = due_by_now(fed, stops)  # a str: None was answered just above
            return f"after {quote(fed)} the text shown must be {quote(due)}, all but what could still become a stop"
    return stream_problem(fed, stops, False, total, checker)


def whole_table(chunks: Sequence[str], stops: Sequence[str], step: int) -> str:
    """The stream's table for a failure found after chunk ``step`` (counted from 1)."""
    return format_trace(feed_trace(chunks, stops), f"the stream, chunk by chunk, with stops {show_stops(stops)}",
                        focus=step - 1)


def as_pair(got: object) -> tuple[str, str | None]:
    """truncate_at_stop's result as a pair, or a failure that says it must be one."""
    if not (isinstance(got, (tuple, list)) and len(got) == 2):
        pytest.fail(f"truncate_at_stop returns a pair (text, stop or None), got {got!r}")
    return got[0], got[1]


def show_stops(stops: Sequence[str]) -> str:
    return "[" + ", ".join(map(quote, stops)) + "]"


# --------------------------------------------------------------- task 1: the batch rule

# (text, stops, the answer): each answer written by hand from the README's rule
TRUNCATE_EXAMPLES = {
    "stop-mid-text": ("Hello world. STOP and more", ["STOP"], ("Hello world. ", "STOP")),
    "no-stop": ("no stop here", ["STOP"], ("no stop here", None)),
    "stop-first": ("STOP at once", ["STOP"], ("", "STOP")),
    "earliest-end-not-list-order": ("abc", ["abc", "b"], ("a", "b")),  # "b" ends first, though "abc" is listed first
    "ends-first-wins": ("xabcd", ["bcd", "abc"], ("x", "abc")),  # "abc" ends at 4, "bcd" at 5
    "tie-earlier-start": ("xabc", ["bc", "abc"], ("x", "abc")),  # both end at 4: the earlier start wins
    "bare-string": ("the end", "end", ("the ", "end")),  # a bare string is one stop
    "emoji-stop": ("a 🫨! b", ["🫨!"], ("a ", "🫨!")),
    "no-stops": ("anything", [], ("anything", None)),
}


@pytest.mark.task(1)
@pytest.mark.parametrize(("text", "stops", "expected"), TRUNCATE_EXAMPLES.values(), ids=TRUNCATE_EXAMPLES.keys())
def test_truncate_at_stop_examples(text: str, stops: str | list[str], expected: tuple[str, str | None]) -> None:
    assert stop_problem(text, [stops] if isinstance(stops, str) else stops, False, expected) is None, (
        "the test's own table disagrees with the rule's properties")
    got = lab.truncate_at_stop(text, stops)
    assert got == expected, (
        f"truncate_at_stop({quote(text)}, {stops!r}) returned {got!r}, expected {expected!r}: "
        "the stop whose occurrence ENDS earliest wins (ties: the one starting earliest), whatever the list order"
    )


@pytest.mark.task(1)
def test_truncate_can_include_the_stop() -> None:
    got = lab.truncate_at_stop("Hello STOP there", ["STOP"], include_stop_str_in_output=True)
    assert got == ("Hello STOP", "STOP"), f"with include_stop_str_in_output the stop itself stays in: got {got!r}"


@pytest.mark.task(1)
def test_no_stop_given_means_no_stops() -> None:
    got = lab.truncate_at_stop("anything at all", None)
    assert got == ("anything at all", None), f"stop=None means no stop strings (as in the API): got {got!r}"


BAD_STOPS = {"empty": ([""], ValueError), "one-empty": (["ok", ""], ValueError), "int": ([3], TypeError),
             "none-in-list": ([None], TypeError), "not-a-list": (42, TypeError),
             "a-set": ({"STOP"}, TypeError),  # no order, no list: say so rather than guess
             "an-iterator": (iter(["STOP"]), TypeError)}


@pytest.mark.task(1)
@pytest.mark.parametrize(("stops", "error"), BAD_STOPS.values(), ids=BAD_STOPS.keys())
def test_truncate_rejects_bad_stops(stops: object, error: type[Exception]) -> None:
    must_raise(lambda: lab.truncate_at_stop("text", stops), error,
               f"truncate_at_stop('text', {stops!r}) (a stop list must be strings, none of them empty)")


ALPHABET = "ab🫨c"
stop_lists = st.lists(st.text(ALPHABET, min_size=1, max_size=4), min_size=1, max_size=4)


@pytest.mark.task(1)
@given(st.text(ALPHABET, max_size=30), stop_lists, st.booleans())
def test_truncate_follows_the_rule_for_any_text(text: str, stops: list[str], include: bool) -> None:
    got = as_pair(lab.truncate_at_stop(text, stops, include))
    problem = stop_problem(text, stops, include, got)
    assert problem is None, f"{problem}: truncate_at_stop({quote(text)}, {show_stops(stops)}, include={include}) " \
                            f"returned {got!r}"


# ------------------------------------------------------------ task 2: feed, examples


@pytest.mark.task(2)
def test_a_split_stop_is_not_leaked() -> None:
    check_feeds(["DEF", "G", "HI", "J"], ["GHI"],
                "a stop split across chunks must never reach the user, and text that cannot start one must not wait")


@pytest.mark.task(2)
def test_nothing_is_held_that_cannot_become_a_stop() -> None:
    check_feeds(["Hello", " wor", "ld"], ["STOP"], "no suffix here could start 'STOP': show everything at once")


@pytest.mark.task(2)
def test_only_the_ambiguous_suffix_is_held_not_a_fixed_lag() -> None:
    checker = lab.StopStringChecker(["</answer>"])
    for chunk, shown, held in [("The answer is 42.<", "The answer is 42.", "<"), ("/ans", "", "</ans"),
                               ("wer!", "</answer!", "")]:
        got = checker.feed(chunk)
        assert (got, checker.held_text) == (shown, held), (
            f"after feeding {quote(chunk)}: showed {quote(got)} and held {quote(checker.held_text)}; expected to "
            f"show {quote(shown)} and hold {quote(held)} — hold only a suffix that could still become '</answer>', "
            "and release a false alarm the moment it cannot"
        )


@pytest.mark.task(2)
def test_two_stops_completing_in_one_chunk() -> None:
    check_feeds(["xx a", "bcd yy"], ["bcd", "abc"], "of two stops completed by one chunk, the one ending first wins")


@pytest.mark.task(2)
@pytest.mark.parametrize("chunks", [["a", "b", "c"], ["abc"]], ids=["split", "one-chunk"])
def test_overlapping_stops_earliest_end_wins(chunks: list[str]) -> None:
    # "abc" is listed first, but "b" is complete one character earlier.
    check_feeds(chunks, ["abc", "b"], "the stop that ends earliest wins, whatever the list order")
    _, checker = feed_all(chunks, ["abc", "b"])
    assert checker.stop_reason == "b", f"stop_reason should be 'b' (it ends first), got {checker.stop_reason!r}"


@pytest.mark.task(2)
def test_stop_at_position_zero() -> None:
    shown, checker = feed_all(["STOP", " never shown"], ["STOP"])
    assert shown == ["", ""], f"a reply that starts with its stop shows nothing, got {shown}"
    assert (checker.stopped, checker.stop_reason) == (True, "STOP"), "the stop at position 0 must be reported"


@pytest.mark.task(2)
def test_stop_completed_by_the_last_chunk() -> None:
    check_feeds(["ok ", "ST", "O", "P"], ["STOP"], "a stop completed by the last chunk is still a stop")
    _, checker = feed_all(["ok ", "ST", "O", "P"], ["STOP"])
    assert checker.stopped, "the last chunk completed 'STOP': stopped must be True"


@pytest.mark.task(2)
def test_input_after_a_stop_is_ignored() -> None:
    checker = lab.StopStringChecker(["END"])
    first = checker.feed("done END")
    later = checker.feed("more text")
    assert (first, later) == ("done ", ""), f"after a stop, feed shows nothing more: got {first!r} then {later!r}"
    assert checker.stop_reason == "END", f"stop_reason should stay 'END', got {checker.stop_reason!r}"


@pytest.mark.task(2)
def test_a_stop_ends_the_reply_and_nothing_stays_held() -> None:
    checker = lab.StopStringChecker(["END"])
    shown = [checker.feed("done EN"), checker.feed("D and more")]
    assert shown == ["done ", ""], f"'EN' waits, then completes 'END': nothing more is shown; got {shown}"
    assert checker.held_text == "", (
        f"after a stop nothing is held: the held {quote(checker.held_text)} was part of the stop, and the reply is "
        "over (a flush would otherwise release it)")


@pytest.mark.task(2)
def test_bad_input_after_a_stop_still_raises() -> None:
    checker = lab.StopStringChecker(["END"])
    checker.feed("done END")
    must_raise(lambda: checker.feed(None), TypeError, "feed(None) after a stop")
    assert checker.feed("more") == "", "after a stop, and after a rejected chunk, feed still shows nothing"


@pytest.mark.task(2)
def test_no_stop_given_streams_everything_at_once() -> None:
    checker = lab.StopStringChecker(None)
    shown = each(checker.feed, ["S", "TOP ", "anything"])
    assert (shown, checker.held_text, checker.stopped) == (["S", "TOP ", "anything"], "", False), (
        f"stop=None means no stop strings: nothing waits and nothing stops; showed {shown}, "
        f"held {quote(checker.held_text)}, stopped={checker.stopped}")


@pytest.mark.task(2)
def test_include_stop_str_in_output_holds_nothing_but_still_matches() -> None:
    chunks, stops = ["Hello </st", "op> never"], ["</stop>"]
    check_feeds(chunks, stops, "with the stop included nothing needs hiding, but a stop begun in shown text still ends "
                "the reply", include=True)
    _, checker = feed_all(chunks, stops, include=True)
    assert checker.stop_reason == "</stop>", f"the stop must still be found, got {checker.stop_reason!r}"


BAD_CHECKER_STOPS = {"empty": ([""], ValueError), "one-empty": (["a", ""], ValueError),
                     "bytes": ([b"x"], TypeError), "int": ([1], TypeError), "float": (3.5, TypeError)}


@pytest.mark.task(2)
@pytest.mark.parametrize(("stops", "error"), BAD_CHECKER_STOPS.values(), ids=BAD_CHECKER_STOPS.keys())
def test_checker_rejects_bad_stops(stops: object, error: type[Exception]) -> None:
    must_raise(lambda: lab.StopStringChecker(stops), error,
               f"StopStringChecker({stops!r}) (a stop list must be strings, none of them empty)")


@pytest.mark.task(2)
def test_duplicate_stops_are_harmless() -> None:
    check_feeds(["a STOP b"], ["STOP", "STOP"], "a stop listed twice is still one stop")


@pytest.mark.task(2)
@pytest.mark.parametrize("bad", [None, b"bytes", 7, ["list"]], ids=["None", "bytes", "int", "list"])
def test_non_str_chunk_raises_and_loses_nothing(bad: object) -> None:
    without_it, clean = feed_all(["wait ST", "OP"], ["STOP"])  # your own checker, never shown the bad chunk
    checker = lab.StopStringChecker(["STOP"])
    shown = [checker.feed("wait ST")]
    held = checker.held_text
    must_raise(lambda: checker.feed(bad), TypeError, f"feed({bad!r})")
    assert checker.held_text == held, (
        f"a rejected chunk must leave the held text alone: it was {quote(held)}, now {quote(checker.held_text)}")
    shown.append(checker.feed("OP"))
    assert (shown, checker.stop_reason) == (without_it, clean.stop_reason), (
        f"a rejected chunk must change nothing: without it your checker showed {without_it} "
        f"(stop {clean.stop_reason!r}), with it {shown} (stop {checker.stop_reason!r})")


# ---------------------------------------------------------- task 2: feed, properties


@pytest.mark.task(2)
@given(st.text(ALPHABET, max_size=30), stop_lists, cut_points(30), st.booleans())
@example(text="xaab", stops=["aab"], cuts=[3], include=False)
def test_streaming_equals_batch_for_any_chunking(text: str, stops: list[str], cuts: list[int],
                                                 include: bool) -> None:
    chunks = split_at(text, cuts)
    shown, checker = feed_all(chunks, stops, include)
    so_far = "".join(shown) + ("" if checker.stopped else checker.held_text)
    problem = stop_problem(text, stops, include, (so_far, checker.stop_reason))
    assert problem is None, format_trace(
        feed_trace(chunks, stops, include),
        f"shown + held after the last chunk must be the batch answer, {quote(so_far)} (stop "
        f"{checker.stop_reason!r}) is not: {problem}")


@pytest.mark.task(2)
@given(st.text(ALPHABET, max_size=30), stop_lists, cut_points(30))
@example(text="xaab", stops=["aab"], cuts=[3])  # holding "a" where "aa" could still become "aab"
def test_no_stop_ever_leaks_and_held_text_is_exactly_the_ambiguous_suffix(text: str, stops: list[str],
                                                                         cuts: list[int]) -> None:
    chunks = split_at(text, cuts)
    checker = lab.StopStringChecker(stops)
    shown = fed = ""
    for step, chunk in enumerate(chunks, start=1):
        fed += chunk
        shown += checker.feed(chunk)
        must_hold = longest_partial_stop(fed, stops)
        table = functools.partial(whole_table, chunks, stops, step)  # built only for a failure's message

        assert not any(s in shown for s in stops), (
            f"a stop string must never reach the user: after chunk {step} you have shown {quote(shown)}\n{table()}")
        if checker.stopped:
            break
        assert checker.held_text == must_hold, hold_problem(fed, checker.held_text, must_hold, "a stop string") \
            + f"\n{table()}"
        assert shown + checker.held_text == fed, (
            f"what is shown plus what is held must be everything fed so far ({quote(fed)}): after chunk {step} you "
            f"have shown {quote(shown)} and hold {quote(checker.held_text)}\n{table()}")


@pytest.mark.task(2)
@pytest.mark.composes("03")
def test_an_emoji_stop_matches_across_byte_tokens() -> None:
    """Byte tokens -> lab-03's detokenizer -> this lab's checker: 🫨! is found though 🫨 arrives in 4 pieces."""
    detokenizer_lab = load_lab("lab-03")
    tokenizer = ByteTokenizer()
    detok = detokenizer_lab.StreamingDetokenizer(tokenizer)
    checker = lab.StopStringChecker(["🫨!"])
    shown = [checker.feed(detok.feed(token_id)) for token_id in tokenizer.encode("Shaking 🫨 then 🫨! and the rest")]
    assert not any("\ufffd" in piece for piece in shown), f"something broken was shown: {shown}"
    assert ("".join(shown), checker.stop_reason) == ("Shaking 🫨 then ", "🫨!"), (
        f"the stop '🫨!' must match across the byte tokens that carry it; showed {quote(''.join(shown))}, "
        f"stop_reason {checker.stop_reason!r}")


@pytest.mark.task(2)
@pytest.mark.parametrize("text", [
    "Thinking... the answer is <ans>42</ans> — 你好 🫨 STO and STOP! then more text that must never show",
    "No stop completes in this one — 你好 🫨 </ans but it ends on a false alarm: STOP",
], ids=["stops", "ends-on-a-false-alarm"])
def test_fifty_random_slicings(text: str) -> None:
    stops = ["STOP!", "</ans>>", "🫨🫨", "never"]
    for seed in range(50):
        rng = random.Random(seed)
        chunks = split_at(text, rng.sample(range(1, len(text)), rng.randint(1, len(text) // 3)))
        check_feeds(chunks, stops, f"slicing {seed} of 50: every feed shows exactly what the rule allows")


@pytest.mark.task(2)
def test_a_stop_that_overlaps_itself_is_found_after_a_near_miss() -> None:
    """Every stop of 2 to 8 letters over 'ab' that starts with 'a' (the rest mirror them), in a seeded text of
    near misses: pieces of the stop's own beginning, glued, fed one character at a time. In 'aaaba' the stop
    'aaba' starts at the second 'a': when the third 'a' breaks the match 'aa' + 'b', the text still ends with
    'aa', a shorter start of the stop, and forgetting it misses the stop; claiming a longer start than the text
    really ends with finds a stop that is not there ('aabc' in 'aababc')."""
    rng = random.Random(5)
    for stop in ("a" + "".join(rest) for n in range(1, 8) for rest in itertools.product("ab", repeat=n)):
        text = ""
        while len(text) < 30:
            text += stop[: rng.randint(1, len(stop) - 1)] if rng.random() < 0.8 else rng.choice("ab")
        shown, checker = feed_all(list(text), [stop])  # one crossing of the sandbox per text; the table on failure
        if fed_stream_problem(list(text), [stop], shown, checker) is not None:
            check_feeds(list(text), [stop], "a stop that overlaps itself must be found where it ends, and nowhere "
                        "else: after a near miss, keep the longest start of the stop that the text still ends with")
            pytest.fail(f"stop {quote(stop)} in {quote(text)}, one character at a time: "
                        f"{fed_stream_problem(list(text), [stop], shown, checker)}")


# ----------------------------------------------------------------------- task 2: feed, cost
# A server checks every token of every reply against the request's stops, on its event loop.
# The test counts the characters read from the stop strings (each stop is a str that counts
# its slices, its indexing and its methods), from the first feed on: building tables in
# __init__ is free. A plain str method over the held text and the chunk cannot be counted; don't.
# In the grading sandbox the stops stay in the tests' process and every read is served from there.


class CountingStop(str):
    """A stop string that adds to ``read`` the characters every slice, index or method call reads of it."""

    read = 0

    def __getitem__(self, key: Any) -> str:
        piece = str.__getitem__(self, key)
        CountingStop.read += len(piece)
        return piece

    def __iter__(self) -> Any:
        CountingStop.read += len(self)
        return str.__iter__(self)

    def __str__(self) -> str:
        CountingStop.read += len(self)
        return str.__str__(self)

    def __add__(self, other: str) -> str:
        CountingStop.read += len(self)
        return str.__add__(self, other)

    def __radd__(self, other: str) -> str:
        CountingStop.read += len(self)
        return str.__add__(other, self)

    # In the grading sandbox the stop stays here: graded code gets a str whose own characters are
    # placeholders, and every read of the stop (indexing, slicing, str(), its methods) is served and
    # counted here (mini_vllm/sandbox/served.py). A copy made with str's C functions copies placeholders.
    sandbox_interface = "counting-str"

    def sandbox_facts(self) -> dict[str, Any]:
        return {"length": len(self), "placeholder": placeholder(str.__str__(self))}

    def text(self) -> str:
        return self.__str__()

    def getitem(self, key: Any) -> str:
        return self[slice(*key) if isinstance(key, list) else key]


def _counting_method(name: str) -> Any:
    method = getattr(str, name)

    def counted(self: str, *args: Any, **kwargs: Any) -> Any:
        CountingStop.read += len(self)
        return method(self, *args, **kwargs)

    return counted


for _name in ("startswith", "endswith", "find", "rfind", "index", "rindex", "count", "__contains__", "__eq__",
              "partition", "rpartition", "split", "encode", "casefold", "lower", "upper", "strip", "replace"):
    setattr(CountingStop, _name, _counting_method(_name))
CountingStop.__hash__ = str.__hash__  # type: ignore[method-assign]  # (__eq__ overridden: keep it hashable)


@pytest.mark.task(2)
def test_a_token_costs_no_more_than_the_longest_stop_however_many_stops() -> None:
    """Many long stops: each feed may read the stops about as much as the longest one is long, plus a few
    characters per stop for each character fed, never (number of stops x their length), let alone the
    square of a stop's length (re-testing every prefix of every stop on every chunk)."""
    stops = [CountingStop(c * 99 + "!") for c in "abcdefghijkl"]  # 12 stops of 100 characters
    plain = [str.__str__(stop) for stop in stops]
    longest = max(map(len, stops))
    checker = lab.StopStringChecker(list(stops))
    draw = random.Random(5)
    chunks = ["".join(draw.choice("aabbcxyz ") for _ in range(draw.randint(1, 4))) for _ in range(150)]
    chunks[50:56] = ["a" * 25] * 6  # a long partial match: the held text grows to 99 characters, then breaks
    CountingStop.read = 0
    fed, shown = "", ""
    for number, chunk in enumerate(chunks, start=1):
        shown += checker.feed(chunk)
        fed += chunk
        budget = 2 * longest * number + 8 * len(stops) * len(fed)
        assert CountingStop.read <= budget, (
            f"feeding {number} chunks ({len(fed)} characters) against {len(stops)} stops of {longest} characters "
            f"read {CountingStop.read:,} characters of the stops; at most {budget:,} allowed (2 x the longest stop "
            f"per chunk, 8 per stop per character fed). Testing every length of every stop again on each chunk "
            f"costs a stop's length squared per token: keep, per stop, how much of it the text ends with, and move "
            f"that count a character at a time")
        problem = stream_problem(fed, plain, False, shown, checker)
        assert problem is None, (
            f"after {number} chunks the text shown must be exactly what the rule allows (the count only means "
            f"something for a checker that is right): read the stops by indexing, slicing or their own methods, as "
            f"these are counted; a str function handed a stop (text.endswith(stop)) reads what the count cannot see. "
            f"{problem}")


# -------------------------------------------------------------------- task 3: flush
# Each test checks only what flush adds to what feed left: the held text, whatever it is.


def flush_after(chunks: Sequence[str], stops: Sequence[str], include: bool = False) -> tuple[str, str, Any]:
    """Feed ``chunks``, then flush: (held text just before the flush, what flush returned, checker)."""
    _, checker = feed_all(chunks, stops, include)
    held = checker.held_text
    return held, checker.flush(), checker


@pytest.mark.task(3)
def test_flush_releases_a_false_alarm_at_the_end() -> None:
    held, tail, checker = flush_after(["the answer", " is ST"], ["STOP"])
    assert tail == held, f"flush must release exactly the held text {quote(held)}, got {quote(tail)}"
    assert checker.held_text == "", f"after flush nothing is held, got {quote(checker.held_text)}"
    assert (checker.stopped, checker.stop_reason) == (False, None), "a false alarm at the end is not a stop"


@pytest.mark.task(3)
def test_flush_twice_gives_the_tail_once() -> None:
    held, first, checker = flush_after(["x <en"], ["<end>"])
    second = checker.flush()
    assert (first, second) == (held, ""), (
        f"the first flush releases the held {quote(held)}, the second nothing; got {quote(first)}, {quote(second)}")


@pytest.mark.task(3)
def test_flush_after_a_stop_gives_nothing() -> None:
    _, tail, _ = flush_after(["done END", " and more"], ["END"])
    assert tail == "", f"after a stop the reply is over: flush must return '', got {quote(tail)}"


@pytest.mark.task(3)
def test_flush_with_the_stop_included_does_not_repeat_shown_text() -> None:
    held, tail, _ = flush_after(["Hello </st"], ["</stop>"], include=True)
    assert tail == held, (f"with include_stop_str_in_output, text kept only for matching was already shown: "
                          f"flush must return the held text {quote(held)}, got {quote(tail)}")


@pytest.mark.task(3)
@pytest.mark.parametrize("later", [["a", "x"], ["b", "a", "x"], ["ba", "b"]], ids=["a-x", "b-a-x", "ba-b"])
def test_after_flush_the_checker_starts_over(later: list[str]) -> None:
    # 'ab' is held for the stop 'aba', then released by flush as ordinary text: it is final. Text fed after
    # the flush must not complete a stop with it, so the checker behaves exactly as a new one would.
    fresh = lab.StopStringChecker(["aba"])
    expected = (each(fresh.feed, later), fresh.held_text, fresh.stop_reason)
    checker = lab.StopStringChecker(["aba"])
    checker.feed("ab")
    checker.flush()
    got = (each(checker.feed, later), checker.held_text, checker.stop_reason)
    assert got == expected, (
        f"flush ends the stream and what it released is final: after feeding 'ab' and flushing (stop 'aba'), "
        f"feeding {later} must go as on a new checker, which showed {expected[0]}, held {quote(expected[1])} "
        f"(stop {expected[2]!r}); yours showed {got[0]}, held {quote(got[1])} (stop {got[2]!r})")


@pytest.mark.task(3)
@given(st.text(ALPHABET, max_size=30), stop_lists, cut_points(30), st.booleans())
@example(text="ab", stops=["abc"], cuts=[], include=False)
def test_flush_releases_exactly_what_is_held(text: str, stops: list[str], cuts: list[int], include: bool) -> None:
    held, tail, checker = flush_after(split_at(text, cuts), stops, include)
    assert tail == held, (f"flush returned {quote(tail)}, but {quote(held)} was held "
                          f"(stops {show_stops(stops)}, text {quote(text)})")
    assert checker.held_text == "", f"after flush nothing is held, got {quote(checker.held_text)}"


# -------------------------------------------------------------------------- control


@pytest.mark.control
def test_checking_each_chunk_alone_leaks_a_split_stop() -> None:
    """The naive checker looks for the stop inside each chunk only: 'GHI' in three pieces walks right past it."""
    shown = []
    for chunk in ["DEF", "G", "HI", "J"]:
        shown.append(chunk.split("GHI")[0])
    assert "".join(shown) == "DEFGHIJ", "the stop string reached the user"
