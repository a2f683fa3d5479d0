"""Lab 04 tests: incremental detokenization of BPE tokens with ``tokenizer.decode`` alone.

Run against your code:  make lab-04
Every tokenizer family ``mini_vllm`` ships is tested (``TOKENIZER_FAMILIES``: one byte per token,
GPT-2 style byte-level BPE, the Llama-style SentencePiece BPE with ``<0xNN>`` byte fallback and a
decoder that strips the first space, and the real Mistral and Tekken vocabularies), plus the two
shipped files loaded by Hugging Face ``tokenizers``. The expected text never comes from a
detokenizer: it is read off the raw token bytes with Python's UTF-8 decoder
(``mini_vllm.testing.stream_oracle``), or taken from the real ``tokenizers`` library; the peer
is Hugging Face's ``DecodeStream`` on the same file.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from tokenizers import Tokenizer as RawTokenizer
from tokenizers.decoders import DecodeStream

from mini_vllm import TOKENIZER_FAMILIES, Tokenizer, load_tokenizer
from mini_vllm.labs import load_lab
from mini_vllm.sandbox import each
from mini_vllm.testing.strategies import multilingual_text
from mini_vllm.testing.stream_oracle import ExpectedStream, expected_stream, utf8_units
from mini_vllm.testing.tokenizers import CountingTokenizer, PieceTokenizer
from mini_vllm.testing.trace import Step, format_trace, quote
from mini_vllm.tokenizers.hf import HFTokenizer, hf_bpe_tokenizer, hf_spm_tokenizer

lab = load_lab("lab-04")

TASKS = {
    1: "__init__ and push: the window-diff, holding unfinished characters",
    2: "the fallback: a split character at the token that completes it, at bounded cost",
    3: "flush, and a prompt that is never shown",
    4: "a prompt that ends inside a character",
}
# Which task a test belongs to is the rule it checks, and nothing else may cost its points:
# - tasks 1 and 2 stream with no prompt, and task 2 keeps special tokens out unless they are
#   skipped (showing them is task 1's rule);
# - on a SentencePiece-style family, task 2 compares text with its spaces taken out: where a
#   ▁word's space shows is task 1's rule (the left context), when a split character shows is task 2's;
# - tasks 3 and 4 check a run with a prompt only when your run of the same ids, with the prompt
#   ending between characters, keeps the push rules (otherwise the push is to blame, and tasks 1
#   and 2 say so); flush must give exactly what the pushes still hold. That excuse holds only for
#   code that gets the test's own task right in its simplest case (SIMPLEST_CASES): code that shows
#   nothing has no push to blame, so an empty answer earns nothing in any task.

FAMILIES = list(TOKENIZER_FAMILIES)  # every family mini_vllm ships: a new one joins every test here
TOKENIZERS: dict[str, Tokenizer] = {name: load_tokenizer(name) for name in FAMILIES}
HF_RAW, HF_SPM_RAW = hf_bpe_tokenizer(), hf_spm_tokenizer()
HF_BPE, HF_SPM = HFTokenizer(HF_RAW), HFTokenizer(HF_SPM_RAW)
TOKENIZERS |= {"hf-bpe": HF_BPE, "hf-spm": HF_SPM}
BYTES, BPE, SPM = TOKENIZERS["byte"], TOKENIZERS["bpe"], TOKENIZERS["spm"]
SHAKING = "🫨"  # f0 9f | ab | a8 in the shipped BPE; four <0xNN> tokens in the spm one
WINDOW = 4
THAI, BURMESE = "สวัสดีครับ วันนี้อากาศดีมาก", "ပုံပြင်လေးပြောပြပါ"


# ----------------------------------------------------------------------------- helpers


# (functools.cache types its arguments as Hashable, which the Tokenizer protocol does not promise: every
# tokenizer here is hashable all the same, so the calls below tell mypy to let them through.)
@functools.cache
def sentencepiece_style(tokenizer: Tokenizer) -> bool:
    """Whether ``decode`` strips the first space of what it decodes (and writes one U+FFFD per byte of a broken run).

    Read off the tokenizer's behaviour, so a new family needs no entry here. A tokenizer made of raw pieces
    (``PieceTokenizer``, which cannot encode) decodes by joining bytes: not that family.
    """
    if isinstance(tokenizer, PieceTokenizer):
        return False
    ids = tokenizer.encode("Hello world")
    word = next(k for k in range(1, len(ids)) if tokenizer.decode_single_token_bytes(ids[k]).startswith(b" "))
    return not tokenizer.decode(ids[word:]).startswith(" ")


def detokenizer(tokenizer: Tokenizer | CountingTokenizer, prompt: Sequence[int] = (), **kwargs: object) -> Any:
    """Your detokenizer over the tokenizer every test hands over: a counting one, served from the tests' side.

    Correctness and cost tests hand over the same kind of object with the same attributes (only the
    cost tests read its count), so code cannot behave one way where its work is counted and another
    where its answer is checked.
    """
    lent = tokenizer if isinstance(tokenizer, CountingTokenizer) else CountingTokenizer(tokenizer)
    return lab.IncrementalDetokenizer(lent, prompt, **kwargs)


def oracle(tokenizer: Tokenizer, prompt: Sequence[int], output: Sequence[int], skip: bool = False) -> ExpectedStream:
    """The contract, read off the raw token bytes (a skipped special token stands for no bytes)."""
    skipped = set(tokenizer.all_special_ids) if skip else set()

    def raw(ids: Sequence[int]) -> list[bytes]:
        return [b"" if i in skipped else tokenizer.decode_single_token_bytes(i) for i in ids]

    family = sentencepiece_style(tokenizer)  # type: ignore[arg-type]
    return expected_stream(raw(prompt), raw(output), strips_leading_space=family, per_byte_replacement=family)


def formula(tokenizer: Tokenizer, prompt: Sequence[int], output: Sequence[int], skip: bool = False) -> str:
    """The batch answer for a prompt that ends between characters: text of all, minus text of the prompt."""
    whole = tokenizer.decode([*prompt, *output], skip_special_tokens=skip)
    return whole[len(tokenizer.decode(prompt, skip_special_tokens=skip)) :]


def pushes(tokenizer: Tokenizer, prompt: Sequence[int], output: Sequence[int], **kwargs: object) -> list[str]:
    """What each push shows (no flush: tasks 1 and 2 must not need task 3's flush)."""
    detok = detokenizer(tokenizer, prompt, **kwargs)
    return each(detok.push, output)


def without_spaces(text: str) -> str:
    return text.replace(" ", "")


PUSH_RULES = ("every push: what has been shown is the start of the answer (never wrong), and once every byte "
              "so far forms whole characters, not ending in U+FFFD, all of it has been shown (never late)")


@dataclass
class Streamed:
    """One run of your detokenizer: what each push showed, and the failure of the push rules (or None)."""

    detok: object
    pushed: list[str]
    problem: str | None


def stream_problem(tokenizer: Tokenizer, prompt: Sequence[int], output: Sequence[int], skip: bool = False,
                   window: int = WINDOW, spaces_on_spm_are_task_1: bool = False,
                   rule: str = PUSH_RULES) -> Streamed:
    """Your detokenizer streams ``output`` after ``prompt``; the push rules are checked after every token."""
    detok = detokenizer(tokenizer, prompt, window=window, skip_special_tokens=skip)
    pushed = each(detok.push, output)  # every push, in order (one crossing of the sandbox)
    problem = pushes_problem(tokenizer, prompt, output, pushed, skip, window, spaces_on_spm_are_task_1, rule)
    return Streamed(detok, pushed, problem)


def brief(text: str, keep: int = 80) -> str:
    """``quote(text)``, its start cut off on a long stream (a cost test's runs are hundreds of tokens)."""
    return quote(text) if len(text) <= keep else "…" + quote(text[-keep:])


def pushes_problem(tokenizer: Tokenizer, prompt: Sequence[int], output: Sequence[int], pushed: Sequence[str],
                   skip: bool = False, window: int = WINDOW, spaces_on_spm_are_task_1: bool = False,
                   rule: str = PUSH_RULES) -> str | None:
    """The push rules, checked after each of the pushes made (the first ``len(pushed)`` tokens of ``output``);
    a failure is what broke, then a table.

    - never wrong: what has been shown is always the start of the final answer;
    - never late: when nothing is ambiguous (every byte so far forms whole characters and the
      last one is not U+FFFD), all of it has been shown. A stream that ends on a whole
      character is then complete without flush (what flush gives is task 3's rule).

    The table's right-hand column is the oracle's: what must be out by then, on the rows where
    nothing is ambiguous. With ``spaces_on_spm_are_task_1``, a SentencePiece-style stream is
    compared (and shown) with its spaces taken out: where a space shows is task 1's rule.
    """
    expected = oracle(tokenizer, prompt, output, skip)
    spaceless = spaces_on_spm_are_task_1 and sentencepiece_style(tokenizer)  # type: ignore[arg-type]
    same = without_spaces if spaceless else str
    final = same(expected.text)
    shown = ""
    steps, problem, at = [], None, 0
    for k, (token_id, piece) in enumerate(zip(output, pushed, strict=False), start=1):
        shown += piece
        due = same("".join(expected.per_token[:k]))
        required = due if expected.settled[k - 1] else None  # the least that must be out by now
        if problem is None and not final.startswith(same(shown)):
            answer = quote(final) if len(final) <= 80 else quote(final[:80]) + "…"
            problem, at, required = (f"after token {k} the text shown, {brief(same(shown))}, is not how the answer "
                                     f"{answer} starts (too early, or wrong text)"), k, due
        elif problem is None and required is not None and same(shown) != required:
            problem, at = f"after token {k} nothing is ambiguous, yet {brief(required[len(same(shown)):])} is " \
                          "still held back (too late)", k
        steps.append(Step(str(token_id), tokenizer.decode_single_token_bytes(token_id), same(shown), required))
    if problem is None:
        return None
    columns = ("shown so far" + (" (no spaces)" if spaceless else ""), "due by then (oracle)")
    table = format_trace(steps, f"{rule} (window={window})", columns=columns, focus=at - 1)
    return f"{problem}\n{table}"


def check_stream(tokenizer: Tokenizer, prompt: Sequence[int], output: Sequence[int], skip: bool = False,
                 window: int = WINDOW, spaces_on_spm_are_task_1: bool = False) -> None:
    problem = stream_problem(tokenizer, prompt, output, skip, window, spaces_on_spm_are_task_1).problem
    assert problem is None, problem


def between_characters(tokenizer: Tokenizer, ids: Sequence[int], skip: bool = False) -> list[int]:
    """Token positions no character straddles, read off the raw token bytes with the UTF-8 decoder."""
    skipped = set(tokenizer.all_special_ids) if skip else set()
    raw = [b"" if i in skipped else tokenizer.decode_single_token_bytes(i) for i in ids]
    starts = {0, sum(map(len, raw))} | {unit.start for unit in utf8_units(b"".join(raw))}
    offsets = [0]
    for piece in raw:
        offsets.append(offsets[-1] + len(piece))
    return [k for k, offset in enumerate(offsets) if offset in starts]


PROMPT_RULE = ("a prompt's characters are never shown; a character it leaves unfinished belongs to the output, "
               "shown with the token that completes it (or, if the output breaks it, as the output's U+FFFD)")
SHORT_PROMPT_RULE = ("a prompt too short to hold window - 1 tokens of context is the context, all of it, from token 0: "
                     "never an empty context (SentencePiece drops the reply's first space) nor one that starts inside "
                     "the prompt's first character (a byte run after it is spoiled)")


def control_run_keeps_the_rules(tokenizer: Tokenizer, ids: Sequence[int], earlier: int, skip: bool = False,
                                window: int = WINDOW) -> bool:
    """Whether your run of ``ids`` with the prompt ``ids[:earlier]`` (ending between characters) keeps the push
    rules and flushes what it holds: the other tasks' rules, which a test of the prompt's end builds on."""
    run = stream_problem(tokenizer, ids[:earlier], ids[earlier:], skip, window)
    return run.problem is None and flush_problem(tokenizer, ids[:earlier], ids[earlier:], run.pushed,
                                                 run.detok.flush(), skip) is None  # type: ignore[attr-defined]


# A test of task 3 or 4 passes a case when your run of it breaks another task's rule (the push, or flush): the
# mistake is that task's, and its tests show it. That excuse needs a push to blame, so it holds only for code
# that gets the test's own task right in its simplest case, a plain reply; code that shows nothing is excused
# nothing (an empty answer earns no point in any task).
SIMPLEST_CASES = {
    3: "after a prompt, a plain reply shows token by token (the prompt counts as shown, and is the reply's context)",
    4: "after a prompt ending in half a character that the output's first byte breaks (f0 9f | A), that piece is "
       "the prompt's, and the plain reply shows token by token",
}


def simplest_case_problem(task: int, tokenizer: Tokenizer) -> str | None:
    """Your pushes in task ``task``'s simplest case, checked against the oracle (None when they are right).

    Where a space shows on a SentencePiece-style family is task 1's rule, so task 3's case compares text
    without spaces; task 4's runs one byte per token, where no family's rules differ."""
    if task == 4:
        tokenizer, prompt, output = BYTES, list(b"Q\xf0\x9f"), list(b"A plain reply.")
    else:
        tokenizer = BPE if isinstance(tokenizer, PieceTokenizer) else tokenizer  # (a PieceTokenizer cannot encode)
        prompt, output = tokenizer.encode("The prompt."), tokenizer.encode(" A plain reply, in words.")
    pushed = pushes(tokenizer, prompt, output)
    return pushes_problem(tokenizer, prompt, output, pushed, spaces_on_spm_are_task_1=True,
                          rule=f"{SIMPLEST_CASES[task]} (a prompt of {len(prompt)} tokens)")


def excuse(task: int, tokenizer: Tokenizer, why: str) -> None:
    """The case is excused (``why``: the other task's rule your run breaks) if task ``task``'s simplest case is
    right; otherwise the test fails here, with that case's table."""
    problem = simplest_case_problem(task, tokenizer)
    assert problem is None, (
        f"{SIMPLEST_CASES[task]}: {problem}\n(This test grades task {task}. {why}, which would excuse this case, "
        "but only in code that gets the task's simplest case right: what shows nothing has no push to blame.)")


def check_prompt_end(tokenizer: Tokenizer, ids: Sequence[int], split: int, earlier: int, skip: bool = False,
                     window: int = WINDOW, *, task: int, rule: str = PROMPT_RULE) -> None:
    """Stream ``ids`` with the prompt ``ids[:split]`` (it may end inside a character): the push rules, then flush.

    Checked against the oracle only when your own run with the prompt ``ids[:earlier]`` (ending
    between characters) keeps the push rules and flushes what it holds: otherwise the mistake is
    another task's, and the tests of tasks 1 to 3 show it (an excuse that needs ``task``'s simplest case right).
    """
    assert earlier <= split and earlier in between_characters(tokenizer, ids, skip), (
        "test bug: the control run's prompt must end between characters, no later than the graded one's")
    if not control_run_keeps_the_rules(tokenizer, ids, earlier, skip, window):
        excuse(task, tokenizer, f"Your run of these ids with a prompt of {earlier} tokens (ending between "
                                f"characters) breaks the push or flush rules (window={window}, skip={skip})")
        return
    prompt, output = ids[:split], ids[split:]
    run = stream_problem(tokenizer, prompt, output, skip, window,
                         rule=f"{rule} (here a prompt of {split} tokens, skip_special_tokens={skip})")
    assert run.problem is None, run.problem
    problem = flush_problem(tokenizer, prompt, output, run.pushed, run.detok.flush(), skip)  # type: ignore[attr-defined]
    assert problem is None, problem


def flush_problem(tokenizer: Tokenizer, prompt: Sequence[int], output: Sequence[int], pushed: list[str],
                  tail: str, skip: bool = False) -> str | None:
    """Flush releases exactly what the pushes still hold: the answer minus what they showed.

    Checked only when the pushes kept their own rules (never wrong, never late): otherwise what
    they "hold" is not defined, and tasks 1 and 2 own the mistake.
    """
    expected = oracle(tokenizer, prompt, output, skip)
    shown = ""
    for k, piece in enumerate(pushed):
        shown += piece
        if not expected.text.startswith(shown):
            return None
        if expected.settled[k] and shown != "".join(expected.per_token[: k + 1]):
            return None
    if tail == expected.text[len(shown) :]:
        return None
    return (f"flush releases exactly what the pushes still hold (prompt of {len(prompt)} tokens): the pushes showed "
            f"{quote(shown)} of {quote(expected.text)}, so flush must give {quote(expected.text[len(shown):])}, "
            f"but gave {quote(tail)}")


def check_flush(tokenizer: Tokenizer, prompt: Sequence[int], output: Sequence[int], window: int = WINDOW) -> None:
    detok = detokenizer(tokenizer, prompt, window=window)
    pushed = each(detok.push, output)
    tail = detok.flush()
    if pushes_problem(tokenizer, prompt, output, pushed, window=window) is not None:
        excuse(3, tokenizer, "Your pushes here break their own rules (never wrong, never late), so what they hold "
                             "is not defined")
        return
    problem = flush_problem(tokenizer, prompt, output, pushed, tail)
    assert problem is None, problem


# ---------------------------------------------------------------- task 1: the window-diff


@pytest.mark.task(1)
def test_ascii_streams_token_by_token() -> None:
    output = BPE.encode(" Hello there, streaming world!")
    pushed = pushes(BPE, [], output)
    assert pushed == [BPE.decode([i]) for i in output], "ASCII tokens are whole: each shows at once"


@pytest.mark.task(1)
@pytest.mark.parametrize("name", TOKENIZERS)
def test_no_replacement_chars_for_valid_text(name: str) -> None:
    """While the decoded text ends in U+FFFD a character is still arriving: hold it, never show the U+FFFD.

    The answer first: the plain words before the first character that is not ASCII show token by token (what is
    held is only worth checking in code that shows something; when a split character shows is task 2's rule)."""
    tokenizer = TOKENIZERS[name]
    text = "Plain words first, then naïve café — 你好 服务器 乱码 🚀🫨😊 字节 สวัสดี"
    output = tokenizer.encode(text)
    detok = detokenizer(tokenizer, [])
    pushed = each(detok.push, output)
    plain = next(k for k, i in enumerate(output) if not tokenizer.decode_single_token_bytes(i).isascii())
    problem = pushes_problem(tokenizer, [], output[:plain], pushed[:plain],
                             rule="whole tokens show at once: the plain words before the first non-ASCII character")
    assert problem is None, f"whole tokens show at once, before any character that is still arriving: {problem}"
    wrong = [(k, piece) for k, piece in enumerate(pushed, start=1) if "\ufffd" in piece]
    assert not wrong, f"valid text, yet U+FFFD was shown (token, piece): {wrong[:3]}"


SPACE_STRIPPING = [name for name, tokenizer in TOKENIZERS.items() if sentencepiece_style(tokenizer)]  # type: ignore[arg-type]


@pytest.mark.task(1)
@pytest.mark.parametrize("name", SPACE_STRIPPING)
@pytest.mark.parametrize("window", range(1, 9))
def test_leading_spaces_survive_on_spm(name: str, window: int) -> None:
    """▁This decodes to "This" alone and to " This" after other text: the context must carry the space."""
    tokenizer = TOKENIZERS[name]
    output = tokenizer.encode("Q: This This is it. Hello  there")
    expected = oracle(tokenizer, [], output).per_token
    detok = detokenizer(tokenizer, [], window=window)
    pushed = each(detok.push, output)
    steps = [Step(t, tokenizer.decode_single_token_bytes(i), got, want)
             for t, i, got, want in zip(tokenizer.convert_ids_to_tokens(output), output, pushed, expected, strict=True)]
    assert pushed == expected, "every ▁word must show with its space, at its own token\n" + format_trace(steps)


# A reply framed by each family's own special tokens (written as text, they encode as special ids).
FRAMED_REPLIES = {"bpe": "<|im_start|>assistant\nHi!<|im_end|><|endoftext|>",
                  "spm": "<|im_start|>assistant\nHi!<|im_end|><|endoftext|>",
                  "mistral": "<s>assistant\nHi!</s>", "tekken": "<s>[INST]assistant\nHi![/INST]</s>"}


@pytest.mark.task(1)
@pytest.mark.parametrize("name", FRAMED_REPLIES)
@pytest.mark.parametrize("skip", [False, True])
def test_special_tokens_follow_skip_special_tokens(name: str, skip: bool) -> None:
    tokenizer = TOKENIZERS[name]
    output = tokenizer.encode(FRAMED_REPLIES[name])
    pushed = pushes(tokenizer, [], output, skip_special_tokens=skip)
    expected = "assistant\nHi!" if skip else FRAMED_REPLIES[name]
    assert "".join(pushed) == expected, (
        f"special tokens are shown unless skip_special_tokens is set (here {skip}): the pushes must add up to "
        f"{quote(expected)}, not {quote(''.join(pushed))} ({pushed})")


@pytest.mark.task(1)
@pytest.mark.parametrize("bad_id", [-1, 10**6, "7", None, 2.5], ids=repr)
def test_bad_id_raises_and_loses_nothing(bad_id: object) -> None:
    """A rejected id changes nothing: the stream is the one your detokenizer gives without it."""
    output = BPE.encode("ok " + SHAKING + " done")
    middle = output.index(BPE.encode(SHAKING)[1])  # between two tokens of 🫨: a character is half received
    without_bad_id = pushes(BPE, [], output)
    detok = detokenizer(BPE, [])
    pushed = each(detok.push, output[:middle])
    with pytest.raises(ValueError, match="token id") as raised:
        detok.push(bad_id)
    assert str(bad_id) in str(raised.value), "the ValueError must name the bad id"
    pushed += each(detok.push, output[middle:])
    assert pushed == without_bad_id, (
        f"after the rejected id {bad_id!r} the stream must go on as if it had never come: got {pushed}, "
        f"without it {without_bad_id}")


@pytest.mark.task(1)
def test_defaults_are_window_4_and_special_tokens_shown() -> None:
    """IncrementalDetokenizer(tokenizer) is window=4, skip_special_tokens=False: the same text and the same work.

    The text is checked first (whole tokens only: a character split across tokens is task 2's rule), then the
    work is compared."""
    output = BPE.encode("<|im_start|>Hi 你好 there, and on")
    default, explicit = CountingTokenizer(BPE), CountingTokenizer(BPE)
    by_default = pushes(default, [], output)
    problem = pushes_problem(BPE, [], output, by_default)
    assert problem is None, f"IncrementalDetokenizer(tokenizer) with its defaults: {problem}"
    assert by_default == pushes(explicit, [], output, window=4, skip_special_tokens=False), (
        "the defaults are window=4 and skip_special_tokens=False: the pushes must be the same as with them given")
    assert default.ids_decoded == explicit.ids_decoded, (
        f"the defaults are window=4 and skip_special_tokens=False: {default.ids_decoded} ids decoded by default, "
        f"{explicit.ids_decoded} with them given")


@pytest.mark.task(1)
@pytest.mark.parametrize("window", [0, -1, 1.5, "4"], ids=repr)
def test_window_must_be_a_positive_int(window: object) -> None:
    with pytest.raises(ValueError, match="window"):
        detokenizer(BPE, [], window=window)


# ---------------------------------------------------- task 2: the fallback, at bounded cost


@pytest.mark.task(2)
@pytest.mark.parametrize("name", ["bpe", "spm"])
def test_split_emoji_emitted_at_the_token_that_completes_it(name: str) -> None:
    tokenizer = TOKENIZERS[name]
    output = tokenizer.encode(" " + SHAKING)[1:] if name == "spm" else tokenizer.encode(SHAKING)  # spm: drop the ▁
    pieces = {"bpe": [b"\xf0\x9f", b"\xab", b"\xa8"], "spm": [b"\xf0", b"\x9f", b"\xab", b"\xa8"]}[name]
    assert [tokenizer.decode_single_token_bytes(i) for i in output] == pieces, (
        "the shipped tokenizer should split 🫨 into these byte pieces (the lesson's case)")
    output = [*tokenizer.encode("Feeling"), *output, *output]
    detok = detokenizer(tokenizer, [])
    pushed = each(detok.push, output)
    expected = oracle(tokenizer, [], output).per_token
    steps = [Step(str(i), tokenizer.decode_single_token_bytes(i), got, want)
             for i, got, want in zip(output, pushed, expected, strict=True)]
    assert pushed == expected, "each 🫨 shows with the token that completes it\n" + format_trace(steps)


@pytest.mark.task(2)
@pytest.mark.parametrize("name", TOKENIZERS)
def test_split_characters_in_a_row(name: str) -> None:
    tokenizer = TOKENIZERS[name]
    check_stream(tokenizer, [], tokenizer.encode("Q:🫨🫨 乱码字节🚀🫨 x 😊😊"), spaces_on_spm_are_task_1=True)


@pytest.mark.task(2)
@pytest.mark.parametrize("name", FAMILIES)
@pytest.mark.parametrize("text", [THAI, BURMESE], ids=["thai", "burmese"])
def test_thai_and_burmese_through_byte_fallback(name: str, text: str) -> None:
    """On spm every Thai and Burmese character is three <0xNN> tokens, and a run of them has no spaces."""
    tokenizer = TOKENIZERS[name]
    for window in (1, 2, WINDOW):
        check_stream(tokenizer, [], tokenizer.encode("Say:" + text), window=window, spaces_on_spm_are_task_1=True)


@pytest.mark.task(2)
@pytest.mark.parametrize("name", TOKENIZERS)
def test_real_replacement_chars_are_not_held_back(name: str) -> None:
    """A model may write U+FFFD itself. It is shown by the next token that does not end in U+FFFD."""
    tokenizer = TOKENIZERS[name]
    output = tokenizer.encode("a\ufffd\ufffd b \ufffd 你\ufffd🫨\ufffdz")
    check_stream(tokenizer, [], output, spaces_on_spm_are_task_1=True)


@pytest.mark.task(2)
@pytest.mark.parametrize("name", TOKENIZERS)
def test_a_run_of_real_replacement_chars_is_shown_promptly(name: str) -> None:
    """Waiting for a token that does not end in U+FFFD would hold a run of them all, re-decoding it each step.

    Only the last three tokens can hold a character still arriving: the text before them must be out.
    """
    tokenizer = TOKENIZERS[name]
    output = tokenizer.encode("\ufffd" * 20)
    detok = detokenizer(tokenizer, [])
    pushed = len(output) - 3
    shown = "".join(detok.push(i) for i in output[:pushed]).count("\ufffd")
    due = tokenizer.decode(output[: pushed - 3]).count("\ufffd")  # a token may hold several (tekken: two)
    assert shown >= due, (
        f"a model's own U+FFFD is text, and only the last three tokens can still be arriving: after {pushed} "
        f"tokens at least {due} of them must be out, but {shown} were; release what lies before a proven boundary")


@pytest.mark.task(2, points=5)
@given(family=st.sampled_from(FAMILIES), text=multilingual_text(), window=st.integers(1, 8))
@example(family="spm", text="Hello 服 world", window=1)  # a context cut inside 服 spoils its bytes
@example(family="bpe", text="x " + SHAKING + "🫨", window=WINDOW)
@example(family="bpe", text=SHAKING + "A", window=WINDOW)
def test_each_character_shown_with_the_token_that_completes_it(family: str, text: str, window: int) -> None:
    """Any family, any text, any window from 1 to 8 (special tokens skipped: showing them is task 1's rule)."""
    tokenizer = TOKENIZERS[family]
    check_stream(tokenizer, [], tokenizer.encode(text), skip=True, window=window, spaces_on_spm_are_task_1=True)


@pytest.mark.task(2)
@pytest.mark.parametrize("window", [1, WINDOW])
def test_skipped_special_tokens_inside_a_character(window: int) -> None:
    """Skipped special tokens between the bytes of 🫨 are no text: what follows them is not a boundary."""
    half, rest = BPE.encode(SHAKING)[:1], BPE.encode(SHAKING)[1:]
    ids = [*BPE.encode("ok "), *half, *[BPE.eos_token_id] * 4, *rest, *BPE.encode(" done")]
    check_stream(BPE, [], ids, skip=True, window=window)


@pytest.mark.task(2, points=3)
@given(data=st.data())
def test_any_ids(data: st.DataObject) -> None:
    """Arbitrary ids: broken bytes, real U+FFFD, cut-off characters, any window (special tokens skipped)."""
    tokenizer = data.draw(st.sampled_from([BYTES, BPE]), label="tokenizer")
    ids = data.draw(st.lists(st.integers(0, tokenizer.vocab_size - 1), max_size=24), label="ids")
    window = data.draw(st.integers(1, 8), label="window")
    check_stream(tokenizer, [], ids, skip=True, window=window)


# The strings vLLM's tests/tokenizers_/test_detokenize.py streams through every tokenizer it knows.
VLLM_PEER_STRINGS = [
    "Hello here, this is a simple test",
    "vLLM is a high-throughput and memory-efficient inference and serving engine for LLMs. It is designed to "
    "be used in production environments, where inference and serving",
    "我很感谢你的热情",
    "ပုံပြင်လေးပြောပြပါ်",
    "ပုံပြင်လေးပြောပြပါ",
    "URGENCY🌶️",
    "Some text with adjacent special tokens                <|padding|><|padding|><fim_prefix><fim_middle>"
    "<fim_suffix>other text<fim_pad>",
]


@pytest.mark.task(2)
@pytest.mark.parametrize("name", TOKENIZERS)
def test_vllm_peer_strings(name: str) -> None:
    """Like vLLM: each string plus EOS, no prompt, skip_special_tokens=True (vLLM's default)."""
    tokenizer = TOKENIZERS[name]
    same = without_spaces if sentencepiece_style(tokenizer) else str  # type: ignore[arg-type]
    for truth in VLLM_PEER_STRINGS:
        ids = [*tokenizer.encode(truth), tokenizer.eos_token_id]
        check_stream(tokenizer, [], ids, skip=True, spaces_on_spm_are_task_1=True)
        pushed = pushes(tokenizer, [], ids, skip_special_tokens=True)
        assert same("".join(pushed)) == same(tokenizer.decode(ids, skip_special_tokens=True)), (
            f"a reply that ends on a whole character is complete without flush: the pushes for {quote(truth)} "
            f"must add up to decode() of the whole reply, but gave {quote(''.join(pushed))}")


HF_RAWS = {"hf-bpe": (HF_BPE, HF_RAW), "hf-spm": (HF_SPM, HF_SPM_RAW)}


def decode_stream_steps(prompt: Sequence[int], output: Sequence[int], raw: RawTokenizer = HF_RAW,
                        skip: bool = False) -> list[str]:
    decoder = DecodeStream(ids=list(prompt), skip_special_tokens=skip)
    return [decoder.step(raw, i) or "" for i in output]


@pytest.mark.task(2, points=3)
@given(name=st.sampled_from(sorted(HF_RAWS)), text=multilingual_text())
def test_agrees_with_decode_stream_where_it_is_right(name: str, text: str) -> None:
    """Valid text: both stream the same pieces at the same tokens (the peer: Hugging Face's DecodeStream).

    Both skip special tokens: showing them is task 1's rule.
    """
    tokenizer, raw = HF_RAWS[name]
    output = tokenizer.encode(text.replace("\ufffd", ""))
    pushed = pushes(tokenizer, [], output, skip_special_tokens=True)
    same = without_spaces if sentencepiece_style(tokenizer) else str
    peer = decode_stream_steps([], output, raw, skip=True)
    assert [same(p) for p in pushed] == [same(p) for p in peer], (
        f"{name}: {quote(text)} streams as {pushed}, DecodeStream gives {peer}: a character shows at the token "
        "that completes it")


ONE_TOKEN_FFFD = PieceTokenizer([b"\xef\xbf\xbd"])  # a vocabulary whose token 0 is a whole U+FFFD


def cost_streams() -> dict[str, tuple[Tokenizer, list[int]]]:
    """Streams for the cost tests: (tokenizer, the ids of one repeat)."""
    texts = {"cjk": "服务器每生成一个词元就立刻发送给用户。", "emoji": "🫨🚀😊🍜🫨🫨", "fffd": "\ufffd"}
    streams = {f"{family}-{kind}": (TOKENIZERS[family], TOKENIZERS[family].encode(text))
               for family in FAMILIES for kind, text in texts.items()}
    streams |= {name: (TOKENIZERS[family], TOKENIZERS[family].encode(text)) for name, family, text in (
        ("bpe-ascii", "bpe", "The quick brown fox jumps over the lazy dog. "),
        ("bpe-mixed", "bpe", "naïve café — 你好 服务器 🚀🫨 Привет! こんにちは สวัสดี 乱码 \ufffd ok. "),
        ("spm-ascii", "spm", "The quick brown fox jumps over the lazy dog. "),
        ("spm-thai", "spm", "สวัสดีครับวันนี้อากาศดีมาก"))}
    streams["one-token-fffd"] = (ONE_TOKEN_FFFD, [0])
    # " " + half an emoji, then one more byte of it: the space breaks it each time. The text always ends
    # in U+FFFD, and only the first proof (the text after a seam starts with a character) finds a seam.
    streams["bpe-broken-emoji"] = (BPE, [*BPE.encode(" " + SHAKING)[:1], *BPE.encode(SHAKING)[1:2]])
    return streams


COST_STREAMS = cost_streams()
COST_BUDGET = 6 * WINDOW  # ids decoded per token; the reference needs 6 on ASCII, at most 21 (real U+FFFD)
SHORT, LONG = 150, 600  # stream lengths, in tokens: a cost that grows with the stream grows 4x between them
PROMPT = 1000  # tokens of prompt for the cost tests with a prompt (ending inside a character when it can)


def cost_stream(kind: str, length: int) -> tuple[Tokenizer, list[int]]:
    """A stream of ``kind``, at least ``length`` tokens long and ending between characters."""
    tokenizer, unit = COST_STREAMS[kind]
    ids = unit * (length // len(unit) + 2)
    ends = [k for k in between_characters(tokenizer, ids) if k >= length]
    return tokenizer, ids[: ends[0]]


@dataclass
class Measured:
    """One counted run: ids handed to decode per pushed token, and the push rules' verdict on what was pushed."""

    cost: float
    problem: str | None


def measure(tokenizer: Tokenizer, prompt: Sequence[int], output: Sequence[int], window: int = WINDOW,
            spaces_on_spm_are_task_1: bool = False, rule: str = PUSH_RULES) -> Measured:
    """Token ids handed to decode per pushed token (what __init__ decodes is not counted), and whether what
    the pushes showed keeps the push rules: a count only means something for text that is right.

    The counting tokenizer refuses to decode once far over the budget, so a quadratic version fails
    fast instead of running for minutes (the pushes made until then are still checked). In the grading
    sandbox each decode is served and counted in this process (mini_vllm/sandbox/served.py), whatever
    graded code does to what it is given; every other test hands over the same kind of tokenizer.
    """
    counting = CountingTokenizer(tokenizer)
    detok = detokenizer(counting, prompt, window=window)
    counting.ids_decoded = 0
    counting.limit = 4 * COST_BUDGET * len(output) + 2000
    pushed: list[str] = []
    try:
        for start in range(0, len(output), 50):  # 50 pushes per crossing of the sandbox
            pushed += each(detok.push, output[start : start + 50])
    except AssertionError:
        if counting.ids_decoded <= counting.limit:
            raise
    problem = pushes_problem(tokenizer, prompt, output, pushed, window=window,
                             spaces_on_spm_are_task_1=spaces_on_spm_are_task_1, rule=rule)
    if problem is None and len(pushed) == len(output):
        problem = promptness_problem(tokenizer, prompt, output, pushed, spaces_on_spm_are_task_1)
    return Measured(counting.ids_decoded / max(len(pushed), 1), problem)


def promptness_problem(tokenizer: Tokenizer, prompt: Sequence[int], output: Sequence[int], pushed: Sequence[str],
                       spaces_on_spm_are_task_1: bool = False) -> str | None:
    """Only the last three tokens can hold a character still arriving (a character is at most four bytes, a
    token at least one), and decode alone proves a seam one token later at worst: at the end of a stream, the
    text all but the last four tokens finish has been shown. A stream of real U+FFFD is never "settled", so
    without this an empty answer would keep the push rules there."""
    expected = oracle(tokenizer, prompt, output)
    same = without_spaces if spaces_on_spm_are_task_1 and sentencepiece_style(tokenizer) else str  # type: ignore[arg-type]
    due, shown = same("".join(expected.per_token[: max(0, len(output) - 4)])), same("".join(pushed))
    if shown.startswith(due):
        return None
    return (f"only the last three tokens can hold a character still arriving (four, where decode proves the seam "
            f"late): after all {len(output)} tokens, the text the others finish ({len(due):,} characters, ending "
            f"{brief(due[-40:])}) must be out, but {len(shown):,} characters were shown (ending {brief(shown[-40:])})")


def right_then_cost(kind: str, run: Measured) -> float:
    """The answer first: a cost test fails on wrong text before it reads any count."""
    assert run.problem is None, (
        f"a cost test checks the text before it counts the work, and on the {kind} stream the text is wrong: "
        f"{run.problem}")
    return run.cost


def check_cost(kind: str, costs: dict[int, float], setting: str) -> None:
    assert costs[LONG] <= COST_BUDGET, (
        f"the work per token is bounded ({setting}): {costs[LONG]:.1f} ids decoded per token on the {kind} stream "
        f"(counted up to {LONG} tokens, or until far over the budget); the budget is {COST_BUDGET} (6 x the default "
        "window). Is something re-decoding the history?")
    assert costs[LONG] <= costs[SHORT] * 1.05, (
        f"the work per token is bounded ({setting}): on the {kind} stream it grows with the stream "
        f"({costs[SHORT]:.1f} ids per token at {SHORT} tokens, {costs[LONG]:.1f} at {LONG}): the fallback must "
        "stay local")


@pytest.mark.task(2)
@pytest.mark.parametrize("kind", COST_STREAMS)
def test_cost_per_token_is_bounded(kind: str) -> None:
    """Count the token ids handed to decode: a small constant per token, not growing with the stream.

    The text comes first: each push is checked against the oracle (where a space shows on a
    SentencePiece-style family is task 1's rule), then the work is counted."""
    costs = {}
    for length in (SHORT, LONG):
        tokenizer, ids = cost_stream(kind, length)
        costs[length] = right_then_cost(kind, measure(tokenizer, [], ids, spaces_on_spm_are_task_1=True))
    check_cost(kind, costs, "no prompt")


@pytest.mark.task(2)
@pytest.mark.parametrize("kind", ["bpe-cjk", "spm-ascii", "one-token-fffd"])
def test_cost_per_token_is_bounded_with_a_one_token_window(kind: str) -> None:
    """window=1 still keeps one token of context, and the context still moves on: flat work (and right text)."""
    costs = {}
    for length in (SHORT, LONG):
        tokenizer, ids = cost_stream(kind, length)
        costs[length] = right_then_cost(kind, measure(tokenizer, [], ids, window=1, spaces_on_spm_are_task_1=True))
    check_cost(kind, costs, "window=1")


# ---------------------------------------------------- task 3: flush, and a prompt that is never shown


@pytest.mark.task(3)
@pytest.mark.parametrize("name", TOKENIZERS)
def test_prompt_is_never_re_emitted(name: str) -> None:
    """The prompt counts as shown: the reply's tokens show the reply, never the prompt's text."""
    tokenizer = TOKENIZERS[name]
    prompt, output = tokenizer.encode("The prompt says: 你好 🫨"), tokenizer.encode(" and the answer 🚀")
    assert tokenizer.decode(prompt) == "The prompt says: 你好 🫨", "test bug: this prompt must end on a whole character"
    check_prompt_end(tokenizer, [*prompt, *output], len(prompt), 0, task=3)


@pytest.mark.task(3)
@pytest.mark.parametrize("name", TOKENIZERS)
def test_a_prompt_as_short_as_the_window_is_all_context(name: str) -> None:
    """A prompt of at most ``window`` tokens, too short to leave ``window - 1`` tokens of context after a boundary,
    is the context, all of it, from token 0: an empty context strips the first space of the reply on a
    SentencePiece family (``▁there`` after the prompt ``▁Hi``), and one that starts inside the prompt's first
    character spoils a byte run after it."""
    tokenizer = TOKENIZERS[name]
    for text in ("Hi there 🫨 friend", SHAKING + SHAKING + " x", SHAKING + "你好 x"):
        ids = tokenizer.encode(text)
        for window in (1, WINDOW):
            for cut in between_characters(tokenizer, ids):
                if 0 < cut <= window:
                    check_prompt_end(tokenizer, ids, cut, 0, window=window, task=3, rule=SHORT_PROMPT_RULE)


@pytest.mark.task(3)
@pytest.mark.parametrize("name", TOKENIZERS)
def test_flush_releases_a_cut_off_character(name: str) -> None:
    """max_tokens ran out in the middle of 🫨: the pushes hold it, and flush gives its U+FFFD (or one per byte)."""
    tokenizer = TOKENIZERS[name]
    output = tokenizer.encode(" x" + SHAKING)[:-1]
    check_flush(tokenizer, tokenizer.encode("ok"), output)


@pytest.mark.task(3)
@pytest.mark.parametrize("name", TOKENIZERS)
def test_flush_releases_exactly_what_was_held(name: str) -> None:
    """Cut a mixed reply after every token: flush gives the rest, whole, broken or empty."""
    tokenizer = TOKENIZERS[name]
    ids = tokenizer.encode("ok 🫨 你好\ufffd สวัสดี 🚀 done")
    for end in range(len(ids) + 1):
        check_flush(tokenizer, tokenizer.encode("Q:"), ids[:end])


@pytest.mark.task(3)
@pytest.mark.parametrize("name", TOKENIZERS)
def test_vllm_peer_strings_half_as_prompt(name: str) -> None:
    """Like vLLM: each string plus EOS, the first half (by its own token count) as the prompt, both skip settings."""
    tokenizer = TOKENIZERS[name]
    for truth in VLLM_PEER_STRINGS:
        ids = [*tokenizer.encode(truth), tokenizer.eos_token_id]
        half = len(tokenizer.encode(truth[: len(truth) // 2]))
        for skip in (False, True):
            cut = max(k for k in between_characters(tokenizer, ids, skip) if k <= half)  # (task 4: inside one)
            check_prompt_end(tokenizer, ids, cut, 0, skip=skip, task=3)


def within_other_tasks_rules(tokenizer: Tokenizer, prompt: Sequence[int], output: Sequence[int],
                             counted: bool = True) -> bool:
    """Whether your run of ``output`` after ``prompt`` (ending between characters, or empty) is right (and, if
    ``counted``, within budget): what a test of a later task's cost builds on (otherwise the earlier task's own
    tests show the mistake)."""
    run = measure(tokenizer, prompt, output)
    return run.problem is None and (not counted or run.cost <= COST_BUDGET)


def prompt_cost(kind: str, inside_a_character: bool) -> None:
    """Ids decoded per token after a long prompt, with every push checked against the oracle first.

    Graded when the same stream without a prompt is right and within budget (and, for a prompt that
    ends inside a character, the same stream after a prompt ending at the boundary before it).
    """
    costs, task = {}, 4 if inside_a_character else 3
    for length in (SHORT, LONG):
        tokenizer, ids = cost_stream(kind, PROMPT + length)
        if not within_other_tasks_rules(tokenizer, [], ids[PROMPT:]):
            excuse(task, tokenizer, f"With no prompt at all, your run of the {kind} stream is wrong or over budget")
            return  # task 2's tests show it
        boundaries = between_characters(tokenizer, ids[: PROMPT + 8])
        cuts = [k for k in range(PROMPT, PROMPT + 8) if (k not in boundaries) == inside_a_character]
        split = cuts[0] if cuts else PROMPT
        earlier = max(k for k in boundaries if k <= split)
        if inside_a_character and not within_other_tasks_rules(tokenizer, ids[:earlier], ids[earlier:], counted=False):
            excuse(task, tokenizer, f"After a prompt of {earlier} tokens ending between characters, your run of the "
                                    f"{kind} stream is wrong")
            return  # task 3 shows it (the cost here is this test's)
        rule = f"{PROMPT_RULE} (here a prompt of {split} tokens)"
        costs[length] = right_then_cost(kind, measure(tokenizer, ids[:split], ids[split:], rule=rule))
    where = "inside a character" if inside_a_character else "between characters"
    check_cost(kind, costs, f"after a prompt of about {PROMPT} tokens that ends {where}")


@pytest.mark.task(3)
@pytest.mark.parametrize("kind", [kind for kind in COST_STREAMS if kind.endswith(("cjk", "ascii"))])
def test_cost_per_token_is_bounded_after_a_long_prompt(kind: str) -> None:
    """The work per token stays flat after a long prompt: the context starts near the prompt's end."""
    prompt_cost(kind, inside_a_character=False)


@pytest.mark.task(3)
@pytest.mark.parametrize("kind", [kind for kind in COST_STREAMS if kind.endswith(("cjk", "ascii"))])
def test_the_first_push_after_a_long_prompt_does_not_decode_the_prompt(kind: str) -> None:
    """An average over hundreds of tokens hides one push that decodes the whole prompt: count the first alone.

    What that push shows is checked first (the prompt is never shown; the push rules hold)."""
    tokenizer, ids = cost_stream(kind, PROMPT + SHORT)
    if not within_other_tasks_rules(tokenizer, [], ids[PROMPT:]):
        excuse(3, tokenizer, f"With no prompt at all, your run of the {kind} stream is wrong or over budget")
        return  # task 2's tests show it
    split = min(k for k in between_characters(tokenizer, ids) if k >= PROMPT)
    counting = CountingTokenizer(tokenizer)
    detok = detokenizer(counting, ids[:split], window=WINDOW)
    counting.ids_decoded, counting.limit = 0, 4 * split
    first = detok.push(ids[split])
    problem = pushes_problem(tokenizer, ids[:split], ids[split:], [first],
                             rule=f"{PROMPT_RULE} (here a prompt of {split} tokens)")
    assert problem is None, f"a cost test checks the text before it counts the work, and here it is wrong: {problem}"
    assert counting.ids_decoded <= COST_BUDGET, (
        f"the context starts near the prompt's end, so a push after a long prompt costs what any push costs: the "
        f"first push after a prompt of {split} tokens (ending between characters, {kind}) handed {counting.ids_decoded}"
        f" ids to decode; the budget per token is {COST_BUDGET} (6 x the default window). __init__ may read the prompt "
        "once; the pushes must not read it again")


@pytest.mark.task(3)
@pytest.mark.parametrize("name", sorted(HF_RAWS))
def test_flush_where_decode_stream_has_none(name: str) -> None:
    """DecodeStream has no flush: a reply cut off mid-character loses its U+FFFD there, never here."""
    tokenizer, _ = HF_RAWS[name]
    check_flush(tokenizer, tokenizer.encode("ok"), tokenizer.encode(" x" + SHAKING)[:-1])


# ---------------------------------------------------- task 4: a prompt that ends inside a character


@pytest.mark.task(4)
@pytest.mark.parametrize("name", TOKENIZERS)
def test_prompt_ending_mid_character(name: str) -> None:
    """The character the prompt leaves unfinished belongs to the output, shown when it completes."""
    tokenizer = TOKENIZERS[name]
    ids = tokenizer.encode("Prompt 🫨 and then the answer 你好")
    cut = next(k for k in range(1, len(ids)) if tokenizer.decode(ids[:k]).endswith("\ufffd"))
    earlier = max(k for k in between_characters(tokenizer, ids) if k <= cut)
    for window in (1, 2, WINDOW):
        check_prompt_end(tokenizer, ids, cut, earlier, window=window, task=4)
        check_prompt_end(tokenizer, ids, cut, 0, window=window, task=4)


# A prompt that ends inside a character, as raw bytes (one token each): (prompt, output, the output's text).
# Who owns a piece of text is decided by its last byte: a character the output completes is the output's,
# and so is the U+FFFD of a piece the output continues but then breaks, or leaves unfinished at the end
# (shown at flush). A piece that the output's first byte cannot continue was already broken: the prompt's.
# The cases are Markus Kuhn's UTF-8 decoder test (3.3, sequences missing their last byte; 3.5, impossible
# bytes) and WHATWG's end-of-queue decoder tests, cut between prompt and output.
PROMPT_CUTS = [
    ("f0", "9f 41", "\ufffdA"),  # continued, then broken: one U+FFFD for f0 9f, the output's
    ("f0", "9f", "\ufffd"),  # continued, then the stream ends: flush gives it
    ("f0 9f", "", ""),  # never continued: the prompt's own (decode(prompt) already shows it)
    ("f0 9f", "41", "A"),  # broken by the output's first byte: the prompt's
    ("f0 9f ab", "a8 41", "🫨A"),  # completed: the output's character
    ("e0", "80 41", "\ufffdA"),  # e0 80 cannot start a character: e0 is the prompt's, the lone 80 the output's
    ("ef bf", "bd", "\ufffd"),  # completed into a real U+FFFD: the output's
    ("ef", "bf", "\ufffd"),  # continued, never completed (Kuhn 3.3.7): flush
    ("df", "41", "A"),  # Kuhn 3.3.6, the last byte missing: the prompt's
    ("f4 8f", "bf bf", "\U0010ffff"),  # the last code point there is
    ("f4", "90 80 80", "\ufffd\ufffd\ufffd"),  # past U+10FFFF: f4 is broken at once (the prompt's)
    ("f7 bf", "bf", "\ufffd"),  # Kuhn 3.3.8: f7 is no lead byte, each byte its own U+FFFD
]


@pytest.mark.task(4)
@pytest.mark.parametrize(("prompt", "output", "text"), PROMPT_CUTS, ids=[f"{p}|{o}" for p, o, _ in PROMPT_CUTS])
def test_whose_character_at_the_prompt_end(prompt: str, output: str, text: str) -> None:
    """A piece of text belongs to whoever holds its last byte; all pushes and flush give the output's text."""
    prompt_ids, output_ids = list(bytes.fromhex(prompt)), list(bytes.fromhex(output))
    assert oracle(BYTES, prompt_ids, output_ids).text == text, "test bug: the oracle disagrees with this case"
    for window in (1, WINDOW):
        if not control_run_keeps_the_rules(BYTES, prompt_ids + output_ids, 0, window=window):
            excuse(4, BYTES, f"Your push or flush breaks on these bytes with no prompt at all (window={window})")
            continue  # tasks 1 to 3 show it
        detok = detokenizer(BYTES, prompt_ids, window=window)
        pieces = [*each(detok.push, output_ids), detok.flush()]
        assert "".join(pieces) == text, (
            f"prompt {prompt}, output {output or '(none)'}: all pushes and flush must give {quote(text)}, but gave "
            f"{quote(''.join(pieces))} ({pieces}, window={window}). The rule: {PROMPT_RULE}")
        check_prompt_end(BYTES, prompt_ids + output_ids, len(prompt_ids), 0, window=window, task=4)


@pytest.mark.task(4)
@pytest.mark.parametrize("name", ["mistral", "tekken"])
def test_whose_character_on_a_real_vocabulary(name: str) -> None:
    """The same rule on real models' tokens: 🫨 is byte tokens on Mistral, and on Tekken a token that
    also holds the character before it. Every cut inside it, with the output completing the emoji,
    continuing it and then breaking it, or breaking it at once."""
    tokenizer = TOKENIZERS[name]
    ids, after = tokenizer.encode("x🫨"), tokenizer.encode("A")
    cuts = [k for k in range(1, len(ids)) if tokenizer.decode(ids[:k]).endswith("\ufffd")]
    assert cuts, f"test bug: no token of 'x🫨' on {name} ends inside the emoji"
    for k in cuts:
        for output in (ids[k:] + after, ids[k : k + 1] + after, after):
            prompt, expected = ids[:k], oracle(tokenizer, ids[:k], output).text
            for window in (1, WINDOW):
                if not control_run_keeps_the_rules(tokenizer, prompt + output, 0, window=window):
                    excuse(4, tokenizer, f"Your push or flush breaks on these tokens with no prompt at all "
                                         f"(window={window})")
                    continue  # tasks 1 to 3 show it
                detok = detokenizer(tokenizer, prompt, window=window)
                pieces = [*each(detok.push, output), detok.flush()]
                assert "".join(pieces) == expected, (
                    f"{PROMPT_RULE}.\nOn {name}, prompt {prompt}, output {output}: all pushes and flush must give "
                    f"{quote(expected)}, but gave {quote(''.join(pieces))} ({pieces}, window={window})")

@pytest.mark.task(4)
@given(data=st.binary(max_size=12), split=st.integers(0, 12), window=st.integers(1, 8))
@example(data=bytes.fromhex("f0 9f ab a8 41"), split=3, window=2)  # no offset may cut 🫨 (a context of 9f ab)
@example(data=bytes.fromhex("e0 b8 ad e0 b8 b1"), split=2, window=1)  # Hugging Face's Thai case, 'อ' then 'ั'
@example(data=bytes.fromhex("a1 c2 a1"), split=2, window=1)  # the prompt's own U+FFFD, then ¡ across the cut
@example(data=bytes.fromhex("ef bf bd f0 9f ab"), split=4, window=4)  # a real U+FFFD, then half an emoji
def test_any_bytes_any_prompt_end(data: bytes, split: int, window: int) -> None:
    """One byte per token: any bytes (broken ones too), a prompt that ends anywhere, any window."""
    ids = list(data)
    split %= len(ids) + 1
    earlier = max(k for k in between_characters(BYTES, ids) if k <= split)
    check_prompt_end(BYTES, ids, split, earlier, window=window, task=4)


def bpe_ids(*pieces: str) -> list[int]:
    """The shipped BPE's ids for these tokens, each given as hex bytes."""
    ids = {BPE.decode_single_token_bytes(i): i for i in range(BPE.vocab_size) if i not in BPE.all_special_ids}
    return [ids[bytes.fromhex(piece)] for piece in pieces]


@pytest.mark.task(4)
@pytest.mark.parametrize("window", [1, 2, 3, 4])
def test_prompt_boundary_four_tokens_back(window: int) -> None:
    """A token can end one character and start the next: the shipped BPE has 8d f0 9f (the end of 不, half of 🫨).

    Prompt x | e4 | b8 | 8d f0 9f | ab: the last position between characters is four tokens back, before e4.
    Looking back only three tokens finds none. Output a8 | 41 completes 🫨: the output's text is 🫨A.
    """
    ids = bpe_ids("78", "e4", "b8", "8df09f", "ab", "a8", "41")
    assert oracle(BPE, ids[:5], ids[5:]).text == SHAKING + "A", "test bug: the oracle disagrees with this case"
    check_prompt_end(BPE, ids, 5, 1, window=window, task=4)
    # Without e4 b8 before it, 8d is a broken byte: its U+FFFD is the prompt's, 🫨 still the output's.
    ids = bpe_ids("78", "8df09f", "ab", "a8", "41")
    assert oracle(BPE, ids[:3], ids[3:]).text == SHAKING + "A", "test bug: the oracle disagrees with this case"
    check_prompt_end(BPE, ids, 3, 1, window=window, task=4)


@pytest.mark.task(4)
@given(st.data())
def test_any_ids_any_prompt_split(data: st.DataObject) -> None:
    """Arbitrary ids: broken bytes, special tokens, both settings of skip_special_tokens, any window."""
    tokenizer = data.draw(st.sampled_from([BYTES, BPE]), label="tokenizer")
    ids = data.draw(st.lists(st.integers(0, tokenizer.vocab_size - 1), max_size=24), label="ids")
    split = data.draw(st.integers(0, len(ids)), label="prompt length")
    skip = data.draw(st.booleans(), label="skip_special_tokens")
    window = data.draw(st.integers(1, 8), label="window")
    earlier = data.draw(st.sampled_from([k for k in between_characters(tokenizer, ids, skip) if k <= split]),
                        label="the control run's prompt length")
    check_prompt_end(tokenizer, ids, split, earlier, skip=skip, window=window, task=4)


@pytest.mark.task(4)
@given(family=st.sampled_from(FAMILIES), text=multilingual_text(), split=st.integers(0, 10**6),
       earlier=st.integers(0, 10**6), window=st.integers(1, 8))
@example(family="byte", text=SHAKING + "A", split=3, earlier=0, window=2)  # the prompt ends inside 🫨
@example(family="spm", text="世界A", split=6, earlier=4, window=1)  # ... inside 界, on byte-fallback tokens
@example(family="bpe", text="\ufffd\ufffd", split=5, earlier=0, window=1)  # inside the second real U+FFFD
def test_any_text_any_prompt_split(family: str, text: str, split: int, earlier: int, window: int) -> None:
    """Any family, any text, a prompt that ends anywhere (mid-character too), any window from 1 to 8."""
    tokenizer = TOKENIZERS[family]
    ids = tokenizer.encode(text)
    split %= len(ids) + 1
    boundaries = [k for k in between_characters(tokenizer, ids) if k <= split]
    check_prompt_end(tokenizer, ids, split, boundaries[earlier % len(boundaries)], window=window, task=4)


@pytest.mark.task(4)
@pytest.mark.parametrize("name", TOKENIZERS)
def test_fifty_random_slicings(name: str) -> None:
    """Fifty seeded prompt ends (inside characters too) and windows of one long mixed text."""
    tokenizer = TOKENIZERS[name]
    text = "Streaming 服务器 🫨🚀 naïve café — 乱码字节 \ufffd Привет 😊 สวัสดี end."
    ids = tokenizer.encode(text * 2)
    boundaries = between_characters(tokenizer, ids)
    for seed in range(50):
        rng = random.Random(seed)
        split, window = rng.randrange(len(ids)), rng.randint(1, 8)
        earlier = rng.choice([k for k in boundaries if k <= split])
        check_prompt_end(tokenizer, ids, split, earlier, window=window, task=4)


@pytest.mark.task(4)
@pytest.mark.parametrize("name", FAMILIES)
def test_prompt_cut_at_every_token(name: str) -> None:
    """Every family, the prompt ending after each token in turn, inside a character too.

    Tekken's tokens straddle Burmese characters (one holds the end of one and the start of the
    next), so only the bytes say where a character ends; Mistral spells them with <0xNN> tokens.
    """
    tokenizer = TOKENIZERS[name]
    ids = tokenizer.encode("Q: 你好 🫨 " + BURMESE + " สวัสดี done")
    boundaries = between_characters(tokenizer, ids)
    for split in range(len(ids) + 1):
        check_prompt_end(tokenizer, ids, split, max(k for k in boundaries if k <= split), task=4)


@pytest.mark.task(4)
@pytest.mark.parametrize("kind", [kind for kind in COST_STREAMS if kind.endswith(("cjk", "fffd"))])
def test_cost_per_token_is_bounded_after_a_prompt_cut_inside_a_character(kind: str) -> None:
    """The work per token stays flat when the prompt ends inside a character (or in U+FFFD, which looks the same)."""
    prompt_cost(kind, inside_a_character=True)


@pytest.mark.task(4)
@pytest.mark.parametrize("name", sorted(HF_RAWS))
def test_prompt_where_decode_stream_leaks_it(name: str) -> None:
    """Seeded with a prompt that ends mid-character, DecodeStream shows the whole prompt; here 🫨 is the output's."""
    tokenizer, _ = HF_RAWS[name]
    ids = tokenizer.encode("Hello 🫨 world")
    cut = ids.index(tokenizer.encode(" " + SHAKING)[-1])  # the prompt ends one token before 🫨 completes
    check_prompt_end(tokenizer, ids, cut, 0, task=4)


# ------------------------------------------------------- the peer's gaps: Hugging Face DecodeStream


@pytest.mark.control
@pytest.mark.parametrize("name", sorted(HF_RAWS))
def test_decode_stream_gaps_are_real(name: str) -> None:
    """The three gaps of tokenizers.decoders.DecodeStream that this lab closes, shown on the real library."""
    tokenizer, raw = HF_RAWS[name]
    # 1. no flush: the cut-off character never comes out
    steps = decode_stream_steps(tokenizer.encode("ok"), tokenizer.encode(" x" + SHAKING)[:-1], raw)
    assert "".join(steps) == " x" and not hasattr(DecodeStream, "flush")
    # 2. a prompt ending mid-character leaks into the output
    ids = tokenizer.encode("Hello 🫨 world")
    cut = ids.index(tokenizer.encode(" " + SHAKING)[-1])
    assert "".join(decode_stream_steps(ids[:cut], ids[cut:], raw)).startswith("Hello")
    # 3. real U+FFFD is held until a token that does not end in U+FFFD: all of it pending, re-decoded each step
    output = tokenizer.encode("\ufffd" * 20)
    assert decode_stream_steps([], output, raw) == [""] * len(output)


# -------------------------------------------------------------------------- controls


def naive_window_diff(tokenizer: Tokenizer, prompt: Sequence[int], output: Sequence[int], window: int = 4) -> list[str]:
    """The first draft: decode the last `window` tokens, diff against the same window minus the new token."""
    tokens, pushed = list(prompt), []
    for token_id in output:
        tokens.append(token_id)
        window_text = tokenizer.decode(tokens[-window:])
        if window_text.endswith("\ufffd"):
            pushed.append("")  # a character is still arriving
            continue
        prefix_text = tokenizer.decode(tokens[-window:-1])
        pushed.append(window_text[len(prefix_text) :])
    return pushed


@pytest.mark.control
def test_window_diff_without_fallback_loses_the_emoji() -> None:
    """Two unfinished tokens decode as two U+FFFD in the shorter window: the diff overshoots by one."""
    pushed = naive_window_diff(BPE, BPE.encode("Feeling"), BPE.encode(SHAKING))
    assert pushed == ["", "", ""], pushed
    assert SHAKING not in "".join(pushed)


@pytest.mark.control
def test_decoding_without_left_context_gives_this_this() -> None:
    """The real library, the shipped spm file: each token decoded on its own loses its leading space."""
    ids = HF_SPM_RAW.encode("This This This", add_special_tokens=False).ids
    assert HF_SPM_RAW.decode(ids) == "This This This"
    alone = "".join(HF_SPM_RAW.decode([i]) for i in ids)
    assert alone == "ThisThisThis", f"Strip removes the first space of every one-token decode: {alone!r}"
    # A window-diff whose context is empty at each step is the same mistake.
    assert "".join(naive_window_diff(HF_SPM, [], ids, window=1)) == "ThisThisThis"


@pytest.mark.control
def test_the_batch_formula_breaks_on_a_prompt_ending_mid_character() -> None:
    """decode(all)[len(decode(prompt)):] on spm: the prompt's dangling bytes show as one U+FFFD *each*."""
    ids = SPM.encode("世界A")  # both characters are three <0xNN> tokens each; a byte token's id is its value + 3
    cut = ids.index(0xE7 + 3) + 2  # the prompt ends with E7 95, the first two bytes of 界
    assert formula(SPM, ids[:cut], ids[cut:]) == "", "the formula drops both 界 and A"
    assert oracle(SPM, ids[:cut], ids[cut:]).text == "界A"
