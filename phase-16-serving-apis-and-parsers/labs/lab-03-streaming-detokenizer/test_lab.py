"""Lab 03 tests: a streaming detokenizer that never emits broken UTF-8.

Run against your code:  LAB_IMPL=starter pytest phase-16-serving-apis-and-parsers/labs/lab-03-streaming-detokenizer -q
Every graded test is marked with the task it grades. The oracle is the definition itself:
hold exactly the bytes that could still become a character, and emit everything else as
``bytes.decode("utf-8", "replace")`` would. Python's incremental decoder is a cross-check.
"""

from __future__ import annotations

import codecs
import functools
import random
from collections.abc import Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mini_vllm import BPETokenizer, ByteTokenizer, Tokenizer
from mini_vllm.labs import load_lab
from mini_vllm.testing.strategies import any_bytes, chunkings, multilingual_text, split_at
from mini_vllm.testing.tokenizers import PieceTokenizer
from mini_vllm.testing.trace import Step, format_trace

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
    starts = set()
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


def trace_against_oracle(tokenizer: Tokenizer, ids: Sequence[int]) -> list[Step]:
    """Run the detokenizer under test beside the oracle, one row per token, then flush."""
    detok = lab.StreamingDetokenizer(tokenizer)
    expected, expected_flush = oracle(tokenizer, ids)
    steps = [
        Step(str(i), tokenizer.decode_single_token_bytes(i), detok.feed(i), want)
        for i, want in zip(ids, expected, strict=True)
    ]
    steps.append(Step("flush", b"", detok.flush(), expected_flush))
    return steps


def assert_matches_oracle(tokenizer: Tokenizer, ids: Sequence[int]) -> None:
    steps = trace_against_oracle(tokenizer, ids)
    assert all(s.emitted == s.expected for s in steps), format_trace(steps)


def pieces_stream(pieces: Sequence[bytes]) -> tuple[PieceTokenizer, list[int]]:
    tokenizer = PieceTokenizer(pieces)
    return tokenizer, tokenizer.ids()


def feed_all(tokenizer: Tokenizer, ids: Sequence[int]) -> tuple[list[str], str]:
    detok = lab.StreamingDetokenizer(tokenizer)
    outputs = [detok.feed(i) for i in ids]
    return outputs, detok.flush()


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


@pytest.mark.task(1)
@pytest.mark.parametrize(
    ("lead_bytes", "length", "why"), LENGTH_TABLE, ids=[row[2].split(":")[0] for row in LENGTH_TABLE]
)
def test_length_table(lead_bytes: range, length: int, why: str) -> None:
    wrong = {hex(b): lab.utf8_expected_len(b) for b in lead_bytes if lab.utf8_expected_len(b) != length}
    assert not wrong, f"{why}: expected {length}, got {wrong}"


@pytest.mark.task(1)
@given(st.characters(exclude_categories=("Cs",)))
def test_length_matches_real_encodings(char: str) -> None:
    encoded = char.encode("utf-8")
    assert lab.utf8_expected_len(encoded[0]) == len(encoded), f"{char!r} is {encoded.hex(' ')}"


# --------------------------------------------------------------- task 2: feed, examples


@pytest.mark.task(2)
def test_ascii_streams_one_char_per_token() -> None:
    text = "Hello, world!"
    outputs, _ = feed_all(BYTES, BYTES.encode(text))
    assert outputs == list(text), "ASCII needs no waiting: each byte token is a whole character"


@pytest.mark.task(2)
def test_emoji_is_held_until_complete() -> None:
    steps = trace_against_oracle(BYTES, BYTES.encode(ROCKET))
    assert [s.emitted for s in steps[:-1]] == ["", "", "", ROCKET], format_trace(steps)


@pytest.mark.task(2)
def test_never_emits_replacement_chars_for_valid_text() -> None:
    outputs, tail = feed_all(BYTES, BYTES.encode(MIXED))
    assert not any("\ufffd" in out for out in outputs), f"U+FFFD emitted for valid text: {outputs}"
    assert "".join(outputs) + tail == MIXED, "valid text must come through whole"


@pytest.mark.task(2)
@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b"\x80", "\ufffd"),  # a continuation byte with no lead
        (b"a\xbf\xbfb", "a\ufffd\ufffdb"),  # two orphans between letters
        (b"\xc0\xaf", "\ufffd\ufffd"),  # overlong '/' (C0 is never valid)
        (b"\xe0\x80\xaf", "\ufffd\ufffd\ufffd"),  # overlong: E0 needs A0..BF next
        (b"\xed\xa0\x80", "\ufffd\ufffd\ufffd"),  # a UTF-16 surrogate (ED needs 80..9F next)
        (b"\xf4\x90\x80\x80", "\ufffd" * 4),  # above U+10FFFF (F4 needs 80..8F next)
        (b"\xff", "\ufffd"),  # never valid anywhere
        (b"\xc3\xf0\x9f\x99\x82", "\ufffd🙂"),  # a broken lead must not swallow the emoji after it
        (b"\xe4\xbdA", "\ufffdA"),  # a cut-off CJK character, then ASCII
    ],
    ids=["lone-continuation", "orphans", "overlong-c0", "overlong-e0", "surrogate", "above-max", "ff",
         "c3-then-emoji", "truncated-cjk"],
)
def test_invalid_bytes_decode_like_the_standard_library(data: bytes, expected: str) -> None:
    assert data.decode("utf-8", "replace") == expected  # the oracle agrees with the table above
    assert_matches_oracle(BYTES, list(data))


@pytest.mark.task(2)
def test_multi_byte_bpe_tokens_stream_whole_characters() -> None:
    text = "服务器 streams 乱码-free text 🚀 and 🫨, 字节 by 字节"
    ids = BPE.encode(text)
    assert_matches_oracle(BPE, ids)
    outputs, tail = feed_all(BPE, ids)
    assert "".join(outputs) + tail == text


@pytest.mark.task(2)
def test_split_emoji_emitted_at_its_last_bpe_token() -> None:
    ids = BPE.encode("🫨")
    assert [BPE.decode_single_token_bytes(i) for i in ids] == [b"\xf0\x9f", b"\xab", b"\xa8"]  # the shipped split
    steps = trace_against_oracle(BPE, ids)
    assert [s.emitted for s in steps] == ["", "", "🫨", ""], format_trace(steps)


@pytest.mark.task(2)
def test_eos_is_ignored() -> None:
    detok = lab.StreamingDetokenizer(BYTES)
    assert [detok.feed(i) for i in BYTES.encode("hi")] == ["h", "i"]
    assert detok.feed(BYTES.eos_token_id) == "", "EOS is a signal, not text"
    # A special token in the middle of an unfinished character neither emits nor loses it.
    first, second = BYTES.encode(ROCKET)[:2], BYTES.encode(ROCKET)[2:]
    assert [detok.feed(i) for i in first] == ["", ""]
    assert detok.feed(BYTES.eos_token_id) == ""
    assert detok.held_bytes == b"\xf0\x9f"
    assert [detok.feed(i) for i in second] == ["", ROCKET]


@pytest.mark.task(2)
@pytest.mark.parametrize("bad_id", [-1, 259, 10**9, "65", 3.0, None, True, [65]], ids=repr)
def test_bad_id_raises_and_keeps_held_bytes(bad_id: object) -> None:
    detok = lab.StreamingDetokenizer(BYTES)
    rocket = BYTES.encode(ROCKET)
    assert [detok.feed(i) for i in rocket[:2]] == ["", ""]
    with pytest.raises(ValueError, match="token id") as raised:
        detok.feed(bad_id)  # type: ignore[arg-type]
    assert str(bad_id) in str(raised.value), f"the error should name the bad id {bad_id!r}: {raised.value}"
    assert detok.held_bytes == b"\xf0\x9f", "a rejected id must not disturb what is held"
    assert [detok.feed(i) for i in rocket[2:]] == ["", ROCKET], "the stream must carry on after a bad id"


# ------------------------------------------------------------- task 2: feed, properties


@pytest.mark.task(2)
@given(multilingual_text())
def test_each_character_emitted_at_the_token_that_completes_it(text: str) -> None:
    ids = list(text.encode("utf-8"))  # byte ids as such: no special-token matching
    expected = []
    for char in text:  # a character appears with its last byte, and never earlier
        expected += [""] * (len(char.encode("utf-8")) - 1) + [char]
    outputs, tail = feed_all(BYTES, ids)
    assert outputs == expected and tail == "", format_trace(
        [Step(str(i), bytes([i]), got, want) for i, got, want in zip(ids, outputs, expected, strict=False)]
    )


@pytest.mark.task(2)
@given(st.data(), any_bytes())
def test_any_bytes_any_split_emits_exactly_what_is_certain(data: st.DataObject, raw: bytes) -> None:
    tokenizer, ids = pieces_stream(data.draw(chunkings(raw)))
    assert_matches_oracle(tokenizer, ids)


@pytest.mark.task(2)
@given(st.data(), any_bytes())
def test_held_bytes_are_exactly_the_unfinished_character(data: st.DataObject, raw: bytes) -> None:
    tokenizer, ids = pieces_stream(data.draw(chunkings(raw)))
    detok = lab.StreamingDetokenizer(tokenizer)
    seen = b""
    for i in ids:
        detok.feed(i)
        seen += tokenizer.decode_single_token_bytes(i)
        must_hold = unfinished_tail(seen)
        held = detok.held_bytes.hex(" ")
        assert len(detok.held_bytes) <= 3, f"held {held}: an unfinished character is at most 3 bytes"
        assert detok.held_bytes == must_hold, (
            f"after token {i} ({tokenizer.decode_single_token_bytes(i).hex(' ')}): held "
            f"{detok.held_bytes.hex(' ') or 'nothing'}, but only {must_hold.hex(' ') or 'nothing'} can still "
            "become a character"
        )


@pytest.mark.task(2)
@given(st.data(), any_bytes())
def test_agrees_with_stdlib_incremental_decoder(data: st.DataObject, raw: bytes) -> None:
    """Python's own streaming decoder, step by step: we may be ahead of it, never behind or different.

    CPython holds a surrogate start (ED A0..BF) until it has all three bytes, because its
    'surrogatepass' error handler needs them; those bytes can never be a character, so
    we emit their U+FFFD at once. Everywhere else the two agree exactly.
    """
    tokenizer, ids = pieces_stream(data.draw(chunkings(raw)))
    detok = lab.StreamingDetokenizer(tokenizer)
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    ours = theirs = ""
    for i in ids:
        ours += detok.feed(i)
        theirs += decoder.decode(tokenizer.decode_single_token_bytes(i))
        assert ours.startswith(theirs), f"after token {i}: we emitted {ours!r}, the stdlib {theirs!r}"
    assert ours + detok.flush() == theirs + decoder.decode(b"", final=True)


# -------------------------------------------------------------------- task 3: flush


@pytest.mark.task(3)
def test_flush_handles_truncated_sequence() -> None:
    detok = lab.StreamingDetokenizer(BYTES)
    outputs = [detok.feed(i) for i in BYTES.encode("ok " + ROCKET)[:-1]]  # cut before the last byte
    assert "".join(outputs) == "ok "
    assert detok.flush() == "\ufffd", "a cut-off character is reported as U+FFFD, not hidden"
    assert detok.held_bytes == b""
    assert detok.flush() == "", "flush releases the tail once"


@pytest.mark.task(3)
def test_flush_after_complete_text_is_empty() -> None:
    _, tail = feed_all(BYTES, BYTES.encode(MIXED))
    assert tail == "", f"nothing should be left after complete text, got {tail!r}"


@pytest.mark.task(3)
@given(st.data(), any_bytes())
def test_stream_plus_flush_equals_batch_decode(data: st.DataObject, raw: bytes) -> None:
    pieces = data.draw(chunkings(raw))
    outputs, tail = feed_all(*pieces_stream(pieces))
    assert "".join(outputs) + tail == raw.decode("utf-8", "replace"), f"pieces: {pieces}"


@pytest.mark.task(3)
def test_fifty_random_slicings() -> None:
    # Ends with broken bytes and then a rocket cut short, as when max_tokens lands mid-emoji.
    text = MIXED + " 日本語のテキスト 🫨😊 plain ascii "
    raw = text.encode("utf-8") + b"\xc3\xf0\x9f\x99\x82\xed\xa0" + b"\xf0\x9f\x9a"
    for seed in range(50):
        rng = random.Random(seed)
        cuts = sorted(rng.sample(range(1, len(raw)), rng.randint(1, len(raw) // 2)))
        pieces = split_at(raw, cuts)
        outputs, tail = feed_all(*pieces_stream(pieces))
        assert "".join(outputs) + tail == raw.decode("utf-8", "replace"), f"seed {seed}: pieces {pieces}"


# -------------------------------------------------------------------------- control


@pytest.mark.control
def test_naive_approach_really_is_broken() -> None:
    """Decoding each token on its own turns one rocket into four replacement characters."""
    naive = [BYTES.decode([i]) for i in BYTES.encode(ROCKET)]
    assert naive == ["\ufffd"] * 4
    assert ROCKET not in "".join(naive)


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
    assert_matches_oracle(SPM, ids)


@pytest.mark.task(3)
def test_spm_output_is_the_raw_bytes_so_the_first_space_stays() -> None:
    """Exact bytes, but not decode(): the first word's ▁ is a real space byte, and lab-03 shows it.

    decode() ends with a Strip step that removes the first space of the decoded string.
    A byte-level detokenizer never sees strings, only bytes, so it cannot know which space
    the decoder would strip. That is why a server streams this family with lab-04, which
    is built on decode and keeps a context in front of the new tokens.
    """
    ids = SPM.encode(SPM_TEXT)
    outputs, tail = feed_all(SPM, ids)
    streamed = "".join(outputs) + tail
    raw = b"".join(SPM.decode_single_token_bytes(i) for i in ids).decode("utf-8")
    assert streamed == raw, "lab-03 must give back exactly the bytes the tokens stand for"
    assert streamed == " " + SPM.decode(ids), (
        f"on spm the stream starts with the space decode() strips: {streamed[:6]!r} vs {SPM.decode(ids)[:5]!r}")


@pytest.mark.control
def test_spm_server_needs_decode_not_bytes() -> None:
    """The difference is real: the tokenizers library itself strips that first space."""
    from mini_vllm.hf import hf_spm_tokenizer

    hf = hf_spm_tokenizer()
    ids = hf.encode("This is it", add_special_tokens=False).ids
    assert hf.decode(ids) == "This is it"
    assert b"".join(SPM.decode_single_token_bytes(i) for i in ids) == b" This is it"
