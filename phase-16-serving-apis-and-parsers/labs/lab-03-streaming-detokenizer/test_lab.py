"""Lab 03 tests: a streaming detokenizer that never emits broken UTF-8.

Run against your code:  make lab-03
Every graded test is marked with the task it grades. The oracle is the definition itself:
hold exactly the bytes that could still become a character, and emit everything else as
``bytes.decode("utf-8", "replace")`` would. Python's incremental decoder is a cross-check.
Feed tests never call ``flush``, and flush tests check only what flush adds to what feed
left held, so a bug costs points only in the task that has it.
"""

from __future__ import annotations

import codecs
import functools
import random
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from mini_vllm import BPETokenizer, ByteTokenizer, Tokenizer
from mini_vllm.labs import load_lab
from mini_vllm.sandbox import each
from mini_vllm.testing.expect import hold_problem, must_raise
from mini_vllm.testing.strategies import any_bytes, cut_points, multilingual_text, split_at
from mini_vllm.testing.tokenizers import PieceTokenizer
from mini_vllm.testing.trace import Step, format_trace, quote

lab = load_lab("lab-03")

TASKS = {
    1: "utf8_expected_len: the lead-byte table",
    2: "feed: emit whole characters, hold the rest",
    3: "flush: release the tail honestly",
}

BYTES = ByteTokenizer()
BPE = BPETokenizer.from_file()
ROCKET = "🚀"  # F0 9F 9A 80
MIXED = "naïve café — 你好 🚀🇫🇷"


# ----------------------------------------------------------------------------- helpers


@functools.cache
def character_starts() -> frozenset[bytes]:
    """Every byte string that is the unfinished start of some real character.

    Brute force over the code points, as the definition: a proper prefix of the UTF-8
    encoding of any code point (surrogates are not characters). Stepping by 64 visits
    every distinct prefix, since a prefix never includes a character's last byte.
    """
    starts: set[bytes] = set()
    for code_point in range(0x80, 0x110000, 64):
        if not 0xD800 <= code_point <= 0xDFFF:
            encoded = chr(code_point).encode("utf-8")
            starts.update(encoded[:k] for k in range(1, len(encoded)))
    return frozenset(starts)


def unfinished_tail(data: bytes) -> bytes:
    """The longest suffix of ``data`` that could still become a character: what must be held."""
    return next((data[-k:] for k in (3, 2, 1) if len(data) >= k and data[-k:] in character_starts()), b"")


def oracle(tokenizer: Tokenizer, ids: Sequence[int]) -> tuple[list[str], str]:
    """What an ideal streamer emits per token, and at flush.

    After each token, everything but the unfinished tail is final, and its text is the
    batch decode of those bytes.
    """
    special = set(tokenizer.all_special_ids)
    data, shown, per_token = b"", "", []
    for i in ids:
        if i not in special:
            data += tokenizer.decode_single_token_bytes(i)
        certain = data[: len(data) - len(unfinished_tail(data))].decode("utf-8", "replace")
        per_token.append(certain[len(shown):])
        shown = certain
    return per_token, data.decode("utf-8", "replace")[len(shown):]


def trace_against_oracle(tokenizer: Tokenizer, ids: Sequence[int], flush: bool = False) -> list[Step]:
    """Run the detokenizer under test beside the oracle, one row per token (then flush, if asked)."""
    detok = lab.StreamingDetokenizer(tokenizer)
    expected, expected_flush = oracle(tokenizer, ids)
    steps = [
        Step(str(i), tokenizer.decode_single_token_bytes(i), detok.feed(i), want)
        for i, want in zip(ids, expected, strict=True)
    ]
    if flush:
        steps.append(Step("flush", b"", detok.flush(), expected_flush))
    return steps


def assert_matches_oracle(tokenizer: Tokenizer, ids: Sequence[int], rule: str) -> None:
    steps = trace_against_oracle(tokenizer, ids)
    if any(s.emitted != s.expected for s in steps):
        pytest.fail(format_trace(steps, rule))


def pieces_stream(pieces: Sequence[bytes]) -> tuple[PieceTokenizer, list[int]]:
    tokenizer = PieceTokenizer(pieces)
    return tokenizer, tokenizer.ids()


def feed_each(tokenizer: Tokenizer, ids: Sequence[int]) -> list[str]:
    """What each feed returned (no flush: that is task 3)."""
    detok = lab.StreamingDetokenizer(tokenizer)
    return each(detok.feed, ids)


def flush_after(tokenizer: Tokenizer, ids: Sequence[int]) -> tuple[bytes, str, Any]:
    """Feed ``ids``, then flush: (bytes held just before the flush, what flush returned, detokenizer)."""
    detok = lab.StreamingDetokenizer(tokenizer)
    for i in ids:
        detok.feed(i)
    held = detok.held_bytes
    return held, detok.flush(), detok


def hexed(data: bytes) -> str:
    return data.hex(" ") or "nothing"


# ------------------------------------------------------------- task 1: the length table

# RFC 3629, section 4: which bytes can begin a character, and how long it is.
LENGTH_TABLE = [
    (range(0x00, 0x80), 1, "ASCII: 0xxxxxxx"),
    (range(0x80, 0xC0), 0, "continuation bytes 10xxxxxx start nothing"),
    (range(0xC0, 0xC2), 0, "C0/C1 could only encode ASCII overlong: never valid"),
    (range(0xC2, 0xE0), 2, "110xxxxx: two-byte characters"),
    (range(0xE0, 0xF0), 3, "1110xxxx: three-byte characters (most CJK)"),
    (range(0xF0, 0xF5), 4, "11110xxx: four-byte characters (emoji)"),
    (range(0xF5, 0x100), 0, "F5..FF would encode past U+10FFFF: never valid"),
]


@pytest.mark.task(1, points=len(LENGTH_TABLE))
def test_length_table() -> None:
    """The whole table, one test: its rows of 0 alone would pay code that answers 0 for every byte."""
    wrong = []
    for lead_bytes, length, why in LENGTH_TABLE:
        got = {hex(b): lab.utf8_expected_len(b) for b in lead_bytes if lab.utf8_expected_len(b) != length}
        if got:
            wrong.append(f"{why}: expected {length}, got {got}")
    assert not wrong, "\n".join(wrong)


@pytest.mark.task(1)
@given(st.characters(exclude_categories=["Cs"]))
def test_length_matches_real_encodings(char: str) -> None:
    encoded = char.encode("utf-8")
    got = lab.utf8_expected_len(encoded[0])
    assert got == len(encoded), (
        f"{quote(char)} is {encoded.hex(' ')}: its lead byte {encoded[0]:#04x} announces {len(encoded)} bytes, "
        f"utf8_expected_len said {got}")


# --------------------------------------------------------------- task 2: feed, examples


@pytest.mark.task(2)
def test_ascii_streams_one_char_per_token() -> None:
    assert_matches_oracle(BYTES, BYTES.encode("Hello, world!"),
                          "ASCII needs no waiting: each byte token is a whole character, shown at once")


@pytest.mark.task(2)
def test_emoji_is_held_until_complete() -> None:
    assert_matches_oracle(BYTES, BYTES.encode(ROCKET),
                          f"{ROCKET} is 4 bytes: show nothing for the first three, the whole emoji at the fourth")


@pytest.mark.task(2)
def test_never_emits_replacement_chars_for_valid_text() -> None:
    outputs = feed_each(BYTES, BYTES.encode(MIXED))
    assert not any("\ufffd" in out for out in outputs), f"U+FFFD emitted for valid text {quote(MIXED)}: {outputs}"
    assert "".join(outputs) == MIXED, (
        f"valid text must come through whole by its last token: got {quote(''.join(outputs))}, expected {quote(MIXED)}")


INVALID_BYTES = {
    "lone-continuation": b"\x80",  # a continuation byte with no lead
    "orphans": b"a\xbf\xbfb",  # two orphans between letters
    "overlong-c0": b"\xc0\xaf",  # overlong '/' (C0 is never valid)
    "overlong-e0": b"\xe0\x80\xaf",  # overlong: E0 needs A0..BF next
    "surrogate": b"\xed\xa0\x80",  # a UTF-16 surrogate (ED needs 80..9F next)
    "above-max": b"\xf4\x90\x80\x80",  # above U+10FFFF (F4 needs 80..8F next)
    "ff": b"\xff",  # never valid anywhere
    "c3-then-emoji": b"\xc3\xf0\x9f\x99\x82",  # a broken lead must not swallow the emoji after it: "\ufffd🙂"
    "truncated-cjk": b"\xe4\xbdA",  # a cut-off CJK character, then ASCII
}


@pytest.mark.task(2)
@pytest.mark.parametrize("data", INVALID_BYTES.values(), ids=INVALID_BYTES.keys())
def test_invalid_bytes_decode_like_the_standard_library(data: bytes) -> None:
    assert_matches_oracle(BYTES, list(data), f"bytes {data.hex(' ')} must stream as bytes.decode('utf-8', "
                          f"'replace') gives them ({quote(data.decode('utf-8', 'replace'))}), each U+FFFD as soon "
                          "as it is certain")


# The edges of RFC 3629's table: after E0, ED, F0 and F4 the second byte has a narrower range,
# and one step past either end of it turns a character into U+FFFD (or the other way round).
RANGE_EDGES = {
    "e0-a0-80=U+0800": b"\xe0\xa0\x80",  # the first 3-byte character: E0's range starts at A0
    "e0-bf-bf=U+0FFF": b"\xe0\xbf\xbf",  # ... and ends at BF
    "e0-9f-overlong": b"\xe0\x9f",  # one below: an overlong start, two U+FFFD at once, nothing held
    "ed-80-80=U+D000": b"\xed\x80\x80",  # ED's range starts at 80 like any other
    "ed-9f-bf=U+D7FF": b"\xed\x9f\xbf",  # ... but ends at 9F: the last character before the surrogates
    "f0-90-80-80=U+10000": b"\xf0\x90\x80\x80",  # the first 4-byte character: F0's range starts at 90
    "f0-8f-overlong": b"\xf0\x8f",  # one below: overlong, nothing held
    "f0-90-c0": b"\xf0\x90\xc0",  # a good start broken by a byte that is no continuation: release it now
    "f4-80-80-80=U+100000": b"\xf4\x80\x80\x80",
    "f4-8f-bf-bf=U+10FFFF": b"\xf4\x8f\xbf\xbf",  # the last code point there is: F4's range ends at 8F
    "f4-90-too-big": b"\xf4\x90",  # one above: past U+10FFFF, nothing held
    "ef-80-80=U+F000": b"\xef\x80\x80",  # E1..EF (other than ED) take the full 80..BF
}


@pytest.mark.task(2)
@pytest.mark.parametrize("data", RANGE_EDGES.values(), ids=RANGE_EDGES.keys())
def test_second_byte_ranges_at_their_edges(data: bytes) -> None:
    """One byte per token, so every prefix is seen: held exactly while a real character could still follow."""
    detok = lab.StreamingDetokenizer(BYTES)
    for step, byte in enumerate(data, start=1):
        detok.feed(byte)
        must_hold = unfinished_tail(data[:step])
        assert detok.held_bytes == must_hold, (
            hold_problem(data[:step], detok.held_bytes, must_hold, "a character")
            + " (RFC 3629: after E0 the next byte must be A0..BF, after ED 80..9F, after F0 90..BF, after F4 80..8F; "
            "any other second byte is final at once)\n"
            + format_trace(trace_against_oracle(BYTES, list(data)), "the stream, byte by byte", focus=step - 1))
    assert_matches_oracle(BYTES, list(data), f"bytes {data.hex(' ')} stream as bytes.decode('utf-8', 'replace') "
                          f"gives them ({quote(data.decode('utf-8', 'replace'))}), each piece as soon as it is certain")


@pytest.mark.task(2)
def test_multi_byte_bpe_tokens_stream_whole_characters() -> None:
    text = "服务器 streams 乱码-free text 🚀 and 🫨, 字节 by 字节"
    assert_matches_oracle(BPE, BPE.encode(text), "BPE tokens carry several bytes: show every character the "
                          "moment its last byte arrives")


@pytest.mark.task(2)
def test_split_emoji_emitted_at_its_last_bpe_token() -> None:
    ids = BPE.encode("🫨")
    pieces = [BPE.decode_single_token_bytes(i) for i in ids]
    assert pieces == [b"\xf0\x9f", b"\xab", b"\xa8"], f"the shipped tokenizer should split 🫨 in three: {pieces}"
    assert_matches_oracle(BPE, ids, "🫨 arrives as f0 9f | ab | a8: it is shown at the third token, whole")


@pytest.mark.task(2)
def test_eos_is_ignored() -> None:
    detok = lab.StreamingDetokenizer(BYTES)
    shown = each(detok.feed, BYTES.encode("hi"))
    eos = detok.feed(BYTES.eos_token_id)
    assert (shown, eos) == (["h", "i"], ""), f"EOS is a signal, not text: got {shown} then {eos!r}"
    # A special token in the middle of an unfinished character neither emits nor loses it.
    first, second = BYTES.encode(ROCKET)[:2], BYTES.encode(ROCKET)[2:]
    shown = [*each(detok.feed, first), detok.feed(BYTES.eos_token_id)]
    assert (shown, detok.held_bytes) == (["", "", ""], b"\xf0\x9f"), (
        f"EOS inside an unfinished {ROCKET} must leave its bytes held: showed {shown}, held {hexed(detok.held_bytes)}")
    shown = each(detok.feed, second)
    assert shown == ["", ROCKET], f"after EOS the rocket's last bytes must complete it: got {shown}"


BAD_IDS = {"negative": -1, "past-vocab": 259, "huge": 10**9, "str": "65", "float": 3.0, "None": None,
           "bool": True, "list": [65]}


@pytest.mark.task(2)
@pytest.mark.parametrize("bad_id", BAD_IDS.values(), ids=BAD_IDS.keys())
def test_bad_id_raises_and_keeps_held_bytes(bad_id: object) -> None:
    rocket = BYTES.encode(ROCKET)
    without_it = feed_each(BYTES, rocket)  # your own detokenizer, never shown the bad id
    detok = lab.StreamingDetokenizer(BYTES)
    shown = each(detok.feed, rocket[:2])
    held = detok.held_bytes
    raised = must_raise(lambda: detok.feed(bad_id), ValueError, f"feed({bad_id!r})")
    assert str(bad_id) in str(raised), f"the error should name the bad id {bad_id!r}: {raised}"
    assert detok.held_bytes == held, (
        f"a rejected id must not disturb what is held: was {hexed(held)}, now {hexed(detok.held_bytes)}")
    shown += each(detok.feed, rocket[2:])
    assert shown == without_it, (
        f"a rejected id must change nothing: without it your detokenizer showed {without_it} for {ROCKET}'s bytes, "
        f"with it {shown}")


# ------------------------------------------------------------- task 2: feed, properties


@pytest.mark.task(2)
@given(multilingual_text())
def test_each_character_emitted_at_the_token_that_completes_it(text: str) -> None:
    ids = list(text.encode("utf-8"))  # byte ids as such: no special-token matching
    expected = []
    for char in text:  # a character appears with its last byte, and never earlier
        expected += [""] * (len(char.encode("utf-8")) - 1) + [char]
    outputs = feed_each(BYTES, ids)
    assert outputs == expected, format_trace(
        [Step(str(i), bytes([i]), got, want) for i, got, want in zip(ids, outputs, expected, strict=False)],
        "each character must appear at the token that carries its last byte, never earlier or later")


@pytest.mark.task(2)
@given(any_bytes(), cut_points())
@example(raw=b"\xed\xa0", cuts=[1])  # a surrogate start: certain to be U+FFFD U+FFFD at once
def test_any_bytes_any_split_emits_exactly_what_is_certain(raw: bytes, cuts: list[int]) -> None:
    tokenizer, ids = pieces_stream(split_at(raw, cuts))
    assert_matches_oracle(tokenizer, ids, "after each token, emit every byte that can no longer become part of a "
                          "character (as U+FFFD if invalid), and hold only the unfinished character")


@pytest.mark.task(2)
@given(any_bytes(), cut_points())
@example(raw=b"\xed\xa0", cuts=[1])  # CPython's incremental decoder holds these; no character starts so
def test_held_bytes_are_exactly_the_unfinished_character(raw: bytes, cuts: list[int]) -> None:
    tokenizer, ids = pieces_stream(split_at(raw, cuts))
    detok = lab.StreamingDetokenizer(tokenizer)
    seen = b""
    for step, i in enumerate(ids, start=1):
        detok.feed(i)
        seen += tokenizer.decode_single_token_bytes(i)
        must_hold = unfinished_tail(seen)
        assert detok.held_bytes == must_hold, (
            hold_problem(seen, detok.held_bytes, must_hold, "a character") + f" (at token {step})\n"
            + format_trace(trace_against_oracle(tokenizer, ids), "the stream, token by token", focus=step - 1))


@pytest.mark.task(2)
@given(any_bytes(), cut_points())
def test_agrees_with_stdlib_incremental_decoder(raw: bytes, cuts: list[int]) -> None:
    """Python's own streaming decoder, step by step: we may be ahead of it, never behind or different.

    CPython holds a surrogate start (ED A0..BF) until it has all three bytes, because its
    'surrogatepass' error handler needs them; those bytes can never be a character, so
    we emit their U+FFFD at once. Everywhere else the two agree exactly.
    """
    tokenizer, ids = pieces_stream(split_at(raw, cuts))
    detok = lab.StreamingDetokenizer(tokenizer)
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    ours = theirs = ""
    for step, i in enumerate(ids, start=1):
        ours += detok.feed(i)
        theirs += decoder.decode(tokenizer.decode_single_token_bytes(i))
        assert ours.startswith(theirs), (
            f"never fall behind Python's incremental UTF-8 decoder or disagree with it: after token {step} it has "
            f"shown {quote(theirs)}, you {quote(ours)}")


@pytest.mark.task(2)
def test_fifty_random_slicings() -> None:
    # Ends with broken bytes and then a rocket cut short, as when max_tokens lands mid-emoji.
    text = MIXED + " 日本語のテキスト 🫨😊 plain ascii "
    raw = text.encode("utf-8") + b"\xc3\xf0\x9f\x99\x82\xed\xa0" + b"\xf0\x9f\x9a"
    for seed in range(50):
        rng = random.Random(seed)
        pieces = split_at(raw, rng.sample(range(1, len(raw)), rng.randint(1, len(raw) // 2)))
        assert_matches_oracle(*pieces_stream(pieces), f"slicing {seed} of 50: each token emits exactly what is "
                              "certain")


# -------------------------------------------------------------------- task 3: flush
# Each test checks only what flush adds to what feed left held, whatever feed held.


@pytest.mark.task(3)
def test_flush_handles_truncated_sequence() -> None:
    held, tail, detok = flush_after(BYTES, BYTES.encode("ok " + ROCKET)[:-1])  # cut before the last byte
    assert tail == held.decode("utf-8", "replace"), (
        f"flush must release the held bytes {hexed(held)} decoded with U+FFFD for what is broken "
        f"({quote(held.decode('utf-8', 'replace'))}), got {quote(tail)}: a cut-off character is reported, not hidden")
    assert detok.held_bytes == b"", f"after flush nothing is held, but {hexed(detok.held_bytes)} still is"
    assert detok.flush() == "", "flush releases the tail once: a second flush returns ''"


@pytest.mark.task(3)
def test_flush_after_complete_text_releases_only_what_is_held() -> None:
    held, tail, _ = flush_after(BYTES, BYTES.encode(MIXED))
    assert tail == held.decode("utf-8", "replace"), (
        f"flush must return exactly the held bytes ({hexed(held)}), decoded: got {quote(tail)}")


@pytest.mark.task(3)
@given(any_bytes(), cut_points())
@example(raw=b"\xf0\x9f\x9a", cuts=[])
def test_flush_releases_the_held_bytes_as_text(raw: bytes, cuts: list[int]) -> None:
    held, tail, detok = flush_after(*pieces_stream(split_at(raw, cuts)))
    assert tail == held.decode("utf-8", "replace"), (
        f"flush returned {quote(tail)}, but the held bytes {hexed(held)} decode to "
        f"{quote(held.decode('utf-8', 'replace'))}: release them, with U+FFFD for what will never finish")
    assert detok.held_bytes == b"", f"after flush nothing is held, but {hexed(detok.held_bytes)} still is"


# -------------------------------------------------------------------------- control


@pytest.mark.control
def test_naive_approach_really_is_broken() -> None:
    """Decoding each token on its own turns one rocket into four replacement characters."""
    naive = [BYTES.decode([i]) for i in BYTES.encode(ROCKET)]
    assert naive == ["\ufffd"] * 4, f"each byte of {ROCKET} alone should decode to U+FFFD, got {naive}"
    assert ROCKET not in "".join(naive), "the user never sees the rocket"


# =====================================================================================
# The SentencePiece family (spm): lab-03 gives the exact bytes, and that is not `decode`.
# Kept apart from the rest of this file on purpose (it was added with the tokenizer families).
# =====================================================================================

from mini_vllm import load_tokenizer  # noqa: E402  (this section is self-contained)

SPM = load_tokenizer("spm")  # Metaspace ▁ for spaces, <0xNN> byte fallback, decode strips one leading space
SPM_TEXT = "This is สวัสดี 🫨 and 服务器"  # Thai, 🫨 and these CJK characters arrive as <0xNN> byte tokens


@pytest.mark.task(2)
def test_spm_bytes_stream_whole_characters_through_byte_fallback() -> None:
    """One <0xNN> token is one byte: the byte rules carry over unchanged, character by character."""
    ids = SPM.encode(SPM_TEXT)
    assert sum(1 for t in SPM.convert_ids_to_tokens(ids) if t.startswith("<0x")) >= 20, "the lesson needs bytes here"
    assert_matches_oracle(SPM, ids, "a <0xNN> token is one byte: the byte rules carry over, character by character")


@pytest.mark.task(2)
def test_spm_output_is_the_raw_bytes_so_the_first_space_stays() -> None:
    """Exact bytes, but not decode(): the first word's ▁ is a real space byte, and lab-03 shows it.

    decode() ends with a Strip step that removes the first space of the decoded string.
    A byte-level detokenizer never sees strings, only bytes, so it cannot know which space
    the decoder would strip. That is why a server streams this family with lab-04, which
    is built on decode and keeps a context in front of the new tokens.
    """
    ids = SPM.encode(SPM_TEXT)
    streamed = "".join(feed_each(SPM, ids))  # the text ends on a whole character: nothing is left to flush
    raw = b"".join(SPM.decode_single_token_bytes(i) for i in ids).decode("utf-8")
    assert streamed == raw, "lab-03 must give back exactly the bytes the tokens stand for"
    assert streamed == " " + SPM.decode(ids), (
        f"on spm the stream starts with the space decode() strips: {streamed[:6]!r} vs {SPM.decode(ids)[:5]!r}")


@pytest.mark.control
def test_spm_server_needs_decode_not_bytes() -> None:
    """The difference is real: the tokenizers library itself strips that first space."""
    from mini_vllm.tokenizers.hf import hf_spm_tokenizer

    hf = hf_spm_tokenizer()
    ids = hf.encode("This is it", add_special_tokens=False).ids
    assert hf.decode(ids) == "This is it", "the real decoder strips the first space"
    assert b"".join(SPM.decode_single_token_bytes(i) for i in ids) == b" This is it", "the bytes keep it"
