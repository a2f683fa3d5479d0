"""Lab 05 tests: stop strings over streamed text.

Run against your code:  LAB_IMPL=starter pytest phase-16-serving-apis-and-parsers/labs/lab-05-stop-strings -q
The streaming checker is held to the batch function for every chunking, and the batch
function to a brute-force reading of the rule.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mini_vllm import ByteTokenizer
from mini_vllm.labs import load_lab
from mini_vllm.testing.strategies import chunkings, split_at
from mini_vllm.testing.trace import Step, format_trace, quote

lab = load_lab("lab-05")

TASKS = {
    1: "truncate_at_stop: the batch rule",
    2: "feed: hold back only a possible stop",
    3: "flush: release the tail at the end",
}


# ----------------------------------------------------------------------------- helpers


def brute_force_stop(text: str, stops: Sequence[str]) -> tuple[int, int, str] | None:
    """The rule, read literally: scan end positions left to right; at the first end where
    some stop finishes, the longest such stop (it starts earliest) wins."""
    for end in range(1, len(text) + 1):
        finishing = [s for s in stops if text[:end].endswith(s)]
        if finishing:
            s = max(finishing, key=len)
            return end - len(s), end, s
    return None


def longest_partial_stop(text: str, stops: Sequence[str]) -> str:
    """The longest suffix of ``text`` that is a proper prefix of some stop: what must be held."""
    return next((text[start:] for start in range(len(text)) if any(
        len(text) - start < len(s) and s.startswith(text[start:]) for s in stops)), "")


def stream(chunks: Sequence[str], stops: Sequence[str], include: bool = False) -> tuple[list[str], str, object]:
    checker = lab.StopStringChecker(list(stops), include_stop_str_in_output=include)
    shown = [checker.feed(chunk) for chunk in chunks]
    return shown, checker.flush(), checker


def trace(chunks: Sequence[str], stops: Sequence[str], include: bool = False) -> str:
    """A timeline of a stream against the batch answer, for failure messages."""
    checker = lab.StopStringChecker(list(stops), include_stop_str_in_output=include)
    steps = []
    expected_total, _ = lab.truncate_at_stop("".join(chunks), list(stops), include)
    for chunk in chunks:
        got = checker.feed(chunk)
        steps.append(Step("feed", chunk, got, f"held: {quote(checker.held_text)}"))
    steps.append(Step("flush", "", checker.flush(), ""))
    return format_trace(steps, f"stops {list(stops)}, answer {quote(expected_total)}", ("shown", "state"))


# --------------------------------------------------------------- task 1: the batch rule


@pytest.mark.task(1)
@pytest.mark.parametrize(
    ("text", "stops", "expected"),
    [
        ("Hello world. STOP and more", ["STOP"], ("Hello world. ", "STOP")),
        ("no stop here", ["STOP"], ("no stop here", None)),
        ("STOP at once", ["STOP"], ("", "STOP")),
        ("abc", ["abc", "b"], ("a", "b")),  # "b" ends first, though "abc" is listed first
        ("xabcd", ["bcd", "abc"], ("x", "abc")),  # "abc" ends at 4, "bcd" at 5
        ("xabc", ["bc", "abc"], ("x", "abc")),  # both end at 4: the earlier start wins
        ("the end", "end", ("the ", "end")),  # a bare string is one stop
        ("a 🫨! b", ["🫨!"], ("a ", "🫨!")),
        ("anything", [], ("anything", None)),
    ],
)
def test_truncate_at_stop_examples(text: str, stops: Sequence[str], expected: tuple[str, str | None]) -> None:
    assert lab.truncate_at_stop(text, stops) == expected


@pytest.mark.task(1)
def test_truncate_can_include_the_stop() -> None:
    assert lab.truncate_at_stop("Hello STOP there", ["STOP"], include_stop_str_in_output=True) == ("Hello STOP", "STOP")


@pytest.mark.task(1)
@pytest.mark.parametrize(("stops", "error"), [([""], ValueError), (["ok", ""], ValueError), ([3], TypeError),
                                              ([None], TypeError), (42, TypeError)], ids=repr)
def test_truncate_rejects_bad_stops(stops: object, error: type[Exception]) -> None:
    with pytest.raises(error):
        lab.truncate_at_stop("text", stops)  # type: ignore[arg-type]


ALPHABET = "ab🫨c"
stop_lists = st.lists(st.text(ALPHABET, min_size=1, max_size=4), min_size=1, max_size=4)


@pytest.mark.task(1)
@given(st.text(ALPHABET, max_size=30), stop_lists, st.booleans())
def test_truncate_follows_the_rule_for_any_text(text: str, stops: list[str], include: bool) -> None:
    found = brute_force_stop(text, stops)
    expected = (text, None) if found is None else (text[: found[1] if include else found[0]], found[2])
    assert lab.truncate_at_stop(text, stops, include) == expected


# ------------------------------------------------------------ task 2: feed, examples


@pytest.mark.task(2)
def test_a_split_stop_is_not_leaked() -> None:
    chunks, stops = ["DEF", "G", "HI", "J"], ["GHI"]
    shown, tail, checker = stream(chunks, stops)
    assert shown == ["DEF", "", "", ""], trace(chunks, stops)
    assert (tail, checker.stopped, checker.stop_reason) == ("", True, "GHI")


@pytest.mark.task(2)
def test_nothing_is_held_that_cannot_become_a_stop() -> None:
    chunks, stops = ["Hello", " wor", "ld"], ["STOP"]
    shown, _, _ = stream(chunks, stops)
    assert shown == chunks, "no suffix here could start 'STOP': show everything at once\n" + trace(chunks, stops)


@pytest.mark.task(2)
def test_only_the_ambiguous_suffix_is_held_not_a_fixed_lag() -> None:
    checker = lab.StopStringChecker(["</answer>"])
    assert checker.feed("The answer is 42.<") == "The answer is 42."
    assert checker.held_text == "<"
    assert checker.feed("/ans") == ""
    assert checker.held_text == "</ans"
    assert checker.feed("wer!") == "</answer!", "a false alarm is released the moment it cannot be a stop"
    assert checker.held_text == ""


@pytest.mark.task(2)
def test_two_stops_completing_in_one_chunk() -> None:
    chunks, stops = ["xx a", "bcd yy"], ["bcd", "abc"]
    shown, _, checker = stream(chunks, stops)
    assert "".join(shown) == "xx " and checker.stop_reason == "abc", trace(chunks, stops)


@pytest.mark.task(2)
@pytest.mark.parametrize("chunks", [["a", "b", "c"], ["abc"]], ids=["split", "one-chunk"])
def test_overlapping_stops_earliest_end_wins(chunks: list[str]) -> None:
    stops = ["abc", "b"]  # "abc" is listed first, but "b" is complete one character earlier
    shown, _, checker = stream(chunks, stops)
    assert "".join(shown) == "a" and checker.stop_reason == "b", trace(chunks, stops)


@pytest.mark.task(2)
def test_stop_at_position_zero() -> None:
    shown, tail, checker = stream(["STOP", " never shown"], ["STOP"])
    assert shown == ["", ""] and tail == "" and checker.stop_reason == "STOP"


@pytest.mark.task(2)
def test_stop_completed_by_the_last_chunk() -> None:
    chunks, stops = ["ok ", "ST", "O", "P"], ["STOP"]
    shown, tail, checker = stream(chunks, stops)
    assert "".join(shown) + tail == "ok " and checker.stopped, trace(chunks, stops)


@pytest.mark.task(2)
def test_input_after_a_stop_is_ignored() -> None:
    checker = lab.StopStringChecker(["END"])
    assert checker.feed("done END") == "done "
    assert checker.feed("more text") == ""
    assert checker.flush() == ""
    assert checker.stop_reason == "END"


@pytest.mark.task(2)
def test_include_stop_str_in_output_holds_nothing_but_still_matches() -> None:
    chunks, stops = ["Hello </st", "op> never"], ["</stop>"]
    shown, tail, checker = stream(chunks, stops, include=True)
    assert shown == ["Hello </st", "op>"], "with the stop included, nothing needs hiding\n" + trace(chunks, stops, True)
    assert checker.stop_reason == "</stop>" and tail == ""


@pytest.mark.task(2)
@pytest.mark.parametrize(("stops", "error"), [([""], ValueError), (["a", ""], ValueError), ([b"x"], TypeError),
                                              ([1], TypeError), (3.5, TypeError)], ids=repr)
def test_checker_rejects_bad_stops(stops: object, error: type[Exception]) -> None:
    with pytest.raises(error):
        lab.StopStringChecker(stops)  # type: ignore[arg-type]


@pytest.mark.task(2)
def test_duplicate_stops_are_harmless() -> None:
    shown, _, checker = stream(["a STOP b"], ["STOP", "STOP"])
    assert shown == ["a "] and checker.stop_reason == "STOP"


@pytest.mark.task(2)
@pytest.mark.parametrize("bad", [None, b"bytes", 7, ["list"]], ids=repr)
def test_non_str_chunk_raises_and_loses_nothing(bad: object) -> None:
    checker = lab.StopStringChecker(["STOP"])
    assert checker.feed("wait ST") == "wait "
    with pytest.raises(TypeError):
        checker.feed(bad)  # type: ignore[arg-type]
    assert checker.held_text == "ST", "a rejected chunk must leave the held text alone"
    assert checker.feed("OP") == "" and checker.stop_reason == "STOP"


# ---------------------------------------------------------- task 2: feed, properties


@pytest.mark.task(2)
@given(st.data(), st.text(ALPHABET, max_size=30), stop_lists, st.booleans())
def test_streaming_equals_batch_for_any_chunking(data: st.DataObject, text: str, stops: list[str],
                                                 include: bool) -> None:
    chunks = data.draw(chunkings(text), label="chunks")
    shown, tail, checker = stream(chunks, stops, include)
    expected, reason = lab.truncate_at_stop(text, stops, include)
    assert ("".join(shown) + tail, checker.stop_reason) == (expected, reason), trace(chunks, stops, include)


@pytest.mark.task(2)
@given(st.data(), st.text(ALPHABET, max_size=30), stop_lists)
def test_no_stop_ever_leaks_and_held_text_is_exactly_the_ambiguous_suffix(data: st.DataObject, text: str,
                                                                         stops: list[str]) -> None:
    chunks = data.draw(chunkings(text), label="chunks")
    checker = lab.StopStringChecker(stops)
    shown = fed = ""
    for chunk in chunks:
        fed += chunk
        shown += checker.feed(chunk)
        assert not any(s in shown for s in stops), f"a stop leaked: {quote(shown)}\n" + trace(chunks, stops)
        if checker.stopped:
            break
        assert shown + checker.held_text == fed, "shown + held must be everything fed so far"
        assert checker.held_text == longest_partial_stop(fed, stops), (
            f"after {quote(fed)}: held {quote(checker.held_text)}, but only "
            f"{quote(longest_partial_stop(fed, stops))} could still become a stop\n" + trace(chunks, stops)
        )


@pytest.mark.task(2)
@pytest.mark.composes("03")
def test_an_emoji_stop_matches_across_byte_tokens() -> None:
    """Byte tokens -> lab-03's detokenizer -> this lab's checker: 🫨! is found though 🫨 arrives in 4 pieces."""
    detokenizer_lab = load_lab("lab-03")
    tokenizer = ByteTokenizer()
    detok = detokenizer_lab.StreamingDetokenizer(tokenizer)
    checker = lab.StopStringChecker(["🫨!"])
    shown = []
    for token_id in tokenizer.encode("Shaking 🫨 then 🫨! and the rest"):
        shown.append(checker.feed(detok.feed(token_id)))
    shown.append(checker.feed(detok.flush()) + checker.flush())
    assert not any("\ufffd" in piece for piece in shown), f"something broken was shown: {shown}"
    assert "".join(shown) == "Shaking 🫨 then " and checker.stop_reason == "🫨!"


# -------------------------------------------------------------------- task 3: flush


@pytest.mark.task(3)
def test_flush_releases_a_false_alarm_at_the_end() -> None:
    chunks, stops = ["the answer", " is ST"], ["STOP"]
    shown, tail, checker = stream(chunks, stops)
    assert "".join(shown) == "the answer is " and tail == "ST", trace(chunks, stops)
    assert not checker.stopped and checker.stop_reason is None


@pytest.mark.task(3)
def test_flush_twice_gives_the_tail_once() -> None:
    checker = lab.StopStringChecker(["<end>"])
    assert checker.feed("x <en") == "x "
    assert (checker.flush(), checker.flush()) == ("<en", "")


@pytest.mark.task(3)
@pytest.mark.parametrize("text", [
    "Thinking... the answer is <ans>42</ans> — 你好 🫨 STO and STOP! then more text that must never show",
    "No stop completes in this one — 你好 🫨 </ans but it ends on a false alarm: STOP",  # the tail matters
], ids=["stops", "ends-on-a-false-alarm"])
def test_fifty_random_slicings(text: str) -> None:
    stops = ["STOP!", "</ans>>", "🫨🫨", "never"]
    expected = lab.truncate_at_stop(text, stops)
    for seed in range(50):
        rng = random.Random(seed)
        chunks = split_at(text, sorted(rng.sample(range(1, len(text)), rng.randint(1, len(text) // 3))))
        shown, tail, checker = stream(chunks, stops)
        assert ("".join(shown) + tail, checker.stop_reason) == expected, f"seed {seed}\n" + trace(chunks, stops)


# -------------------------------------------------------------------------- control


@pytest.mark.control
def test_checking_each_chunk_alone_leaks_a_split_stop() -> None:
    """The naive checker looks for the stop inside each chunk only: 'GHI' in three pieces walks right past it."""
    shown = []
    for chunk in ["DEF", "G", "HI", "J"]:
        shown.append(chunk.split("GHI")[0])
    assert "".join(shown) == "DEFGHIJ", "the stop string reached the user"
