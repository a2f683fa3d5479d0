"""Lab 04 tests: incremental detokenization of BPE tokens with ``tokenizer.decode`` alone.

Run against your code:  make lab-04
The oracle is the batch formula ``decode(prompt + output)[len(decode(prompt)):]``; the
peer is Hugging Face's ``DecodeStream`` on the same tokenizer file.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tokenizers.decoders import DecodeStream

from mini_vllm import BPETokenizer, ByteTokenizer, Tokenizer
from mini_vllm.hf import HFTokenizer, hf_bpe_tokenizer
from mini_vllm.labs import load_lab
from mini_vllm.testing.strategies import multilingual_text
from mini_vllm.testing.tokenizers import CountingTokenizer
from mini_vllm.testing.trace import Step, format_trace, quote

lab = load_lab("lab-04")

TASKS = {
    1: "push: window-diff, holding unfinished characters",
    2: "the fallback: split characters and real U+FFFD at bounded cost",
    3: "flush and the prompt boundary: exact for every stream",
}

BYTES = ByteTokenizer()
BPE = BPETokenizer.from_file()
HF_RAW = hf_bpe_tokenizer()
HF_BPE = HFTokenizer(HF_RAW)
TOKENIZERS: dict[str, Tokenizer] = {"byte": BYTES, "bpe": BPE, "hf-bpe": HF_BPE}
SHAKING = "🫨"  # f0 9f | ab | a8 in the shipped BPE
WINDOW = 4


# ----------------------------------------------------------------------------- helpers


def formula(tokenizer: Tokenizer, prompt: Sequence[int], output: Sequence[int], skip: bool = False) -> str:
    """The batch answer: the text of prompt + output, minus the text of the prompt."""
    whole = tokenizer.decode([*prompt, *output], skip_special_tokens=skip)
    return whole[len(tokenizer.decode(prompt, skip_special_tokens=skip)) :]


def stream(
    tokenizer: Tokenizer, prompt: Sequence[int], output: Sequence[int], **kwargs: object
) -> tuple[list[str], str]:
    detok = lab.IncrementalDetokenizer(tokenizer, prompt, **kwargs)
    pushed = [detok.push(i) for i in output]
    return pushed, detok.flush()


def check_stream(tokenizer: Tokenizer, prompt: Sequence[int], output: Sequence[int], skip: bool = False) -> None:
    """Three rules, checked after every token, with a step-by-step table on failure.

    - never wrong: what has been shown is always the start of the final answer;
    - never late: when the text so far does not end in U+FFFD, all of it has been shown;
    - exact: pushes + flush == the batch formula.
    """
    detok = lab.IncrementalDetokenizer(tokenizer, prompt, skip_special_tokens=skip)
    final = formula(tokenizer, prompt, output, skip)
    shown = required = ""
    steps, problem = [], None
    for k, token_id in enumerate(output, start=1):
        shown += detok.push(token_id)
        so_far = formula(tokenizer, prompt, output[:k], skip)
        settled = not tokenizer.decode([*prompt, *output[:k]], skip_special_tokens=skip).endswith("\ufffd")
        required = so_far if settled else required  # the least that must be out by now
        steps.append(Step(str(token_id), tokenizer.decode_single_token_bytes(token_id), shown, required))
        if problem is None and not final.startswith(shown):
            problem = f"after token {k} the text shown, {quote(shown)}, is not how the answer {quote(final)} starts"
        if problem is None and settled and shown != so_far:
            problem = f"after token {k} nothing is ambiguous, but {quote(so_far[len(shown):])} is still held back"
    shown += detok.flush()
    steps.append(Step("flush", b"", shown, final))
    if problem is None and shown != final:
        problem = f"pushes + flush give {quote(shown)}, the batch formula gives {quote(final)}"
    if problem is not None:
        table = format_trace(steps, "the stream, token by token", columns=("shown so far", "required by then"))
        raise AssertionError(f"{problem}\n{table}")


# ---------------------------------------------------------------- task 1: the window-diff


@pytest.mark.task(1)
def test_ascii_streams_token_by_token() -> None:
    prompt, output = BPE.encode("Q: say hi\nA:"), BPE.encode(" Hello there, streaming world!")
    pushed, tail = stream(BPE, prompt, output)
    assert pushed == [BPE.decode([i]) for i in output], "ASCII tokens are whole: each shows at once"
    assert tail == ""


@pytest.mark.task(1)
def test_prompt_is_never_re_emitted() -> None:
    prompt, output = BPE.encode("The prompt says: 你好"), BPE.encode(" and the answer")
    pushed, tail = stream(BPE, prompt, output)
    assert "".join(pushed) + tail == " and the answer", f"the prompt leaked into the output: {pushed}"


@pytest.mark.task(1)
@pytest.mark.parametrize("name", TOKENIZERS)
def test_no_replacement_chars_for_valid_text(name: str) -> None:
    tokenizer = TOKENIZERS[name]
    text = "naïve café — 你好 服务器 乱码 🚀🫨😊 字节"
    pushed, tail = stream(tokenizer, tokenizer.encode("Prompt: "), tokenizer.encode(text))
    assert not any("\ufffd" in piece for piece in pushed), f"U+FFFD shown for valid text: {pushed}"
    assert "".join(pushed) + tail == text


@pytest.mark.task(1)
@pytest.mark.parametrize("skip", [False, True])
def test_special_tokens_follow_skip_special_tokens(skip: bool) -> None:
    output = BPE.encode("<|im_start|>assistant\nHi!<|im_end|><|endoftext|>")
    pushed, tail = stream(BPE, [], output, skip_special_tokens=skip)
    expected = "assistant\nHi!" if skip else "<|im_start|>assistant\nHi!<|im_end|><|endoftext|>"
    assert "".join(pushed) + tail == expected, f"skip_special_tokens={skip}: {pushed}"


@pytest.mark.task(1)
@pytest.mark.parametrize("bad_id", [-1, 10**6, "7", None, 2.5], ids=repr)
def test_bad_id_raises_and_loses_nothing(bad_id: object) -> None:
    detok = lab.IncrementalDetokenizer(BPE, BPE.encode("Hi"))
    first, second, third = BPE.encode(SHAKING)
    assert [detok.push(first), detok.push(second)] == ["", ""]
    with pytest.raises(ValueError, match="token id") as raised:
        detok.push(bad_id)  # type: ignore[arg-type]
    assert str(bad_id) in str(raised.value)
    assert detok.push(third) == SHAKING, "the emoji must still complete after a rejected id"
    assert detok.flush() == ""


@pytest.mark.task(1)
@pytest.mark.parametrize("window", [0, -1, 1.5, "4"], ids=repr)
def test_window_must_be_a_positive_int(window: object) -> None:
    with pytest.raises(ValueError, match="window"):
        lab.IncrementalDetokenizer(BPE, [], window=window)  # type: ignore[arg-type]


# ---------------------------------------------------- task 2: the fallback, at bounded cost


@pytest.mark.task(2)
def test_split_emoji_emitted_at_the_token_that_completes_it() -> None:
    output = BPE.encode(SHAKING)
    assert [BPE.decode_single_token_bytes(i) for i in output] == [b"\xf0\x9f", b"\xab", b"\xa8"]
    detok = lab.IncrementalDetokenizer(BPE, BPE.encode("Feeling"))
    pushed = [detok.push(i) for i in output]
    expected = ["", "", SHAKING]
    steps = [Step(str(i), BPE.decode([i]), got, want) for i, got, want in zip(output, pushed, expected, strict=True)]
    assert pushed == expected, format_trace(steps)
    assert detok.flush() == "", "nothing should be left for flush"


@pytest.mark.task(2)
@pytest.mark.parametrize("name", TOKENIZERS)
def test_split_characters_in_a_row(name: str) -> None:
    tokenizer = TOKENIZERS[name]
    check_stream(tokenizer, tokenizer.encode("Q:"), tokenizer.encode("🫨🫨 乱码字节🚀🫨 x 😊😊"))


@pytest.mark.task(2)
@pytest.mark.parametrize("name", TOKENIZERS)
def test_real_replacement_chars_are_not_held_back(name: str) -> None:
    """A model may write U+FFFD itself. It is shown by the next token that does not end in U+FFFD."""
    tokenizer = TOKENIZERS[name]
    check_stream(tokenizer, [], tokenizer.encode("a\ufffd\ufffd b \ufffd 你\ufffd🫨\ufffdz"))


@pytest.mark.task(2)
@given(text=multilingual_text(), data=st.data())
def test_each_character_shown_with_the_token_that_completes_it(text: str, data: st.DataObject) -> None:
    tokenizer = TOKENIZERS[data.draw(st.sampled_from(sorted(TOKENIZERS)), label="tokenizer")]
    ids = tokenizer.encode(text)
    split = data.draw(st.integers(0, len(ids)), label="prompt length")
    check_stream(tokenizer, ids[:split], ids[split:])


def cost_stream(kind: str, length: int) -> tuple[Tokenizer, list[int]]:
    """Token streams of a given kind, cut to ``length`` tokens."""
    tokenizer, text = {
        "ascii": (BPE, "The quick brown fox jumps over the lazy dog. "),
        "cjk-byte-tokens": (BYTES, "服务器每生成一个词元就立刻发送给用户。"),
        "emoji": (BPE, "🫨🚀😊🍜🫨🫨"),
        "real-fffd": (BYTES, "\ufffd"),
        "mixed": (BPE, "naïve café — 你好 服务器 🚀🫨 Привет! こんにちは 乱码 \ufffd ok. "),
    }[kind]
    ids = tokenizer.encode(text * (length // 2 + 1))[:length]
    assert len(ids) == length
    return tokenizer, ids


@pytest.mark.task(2)
@pytest.mark.parametrize("kind", ["ascii", "cjk-byte-tokens", "emoji", "real-fffd", "mixed"])
def test_cost_per_token_is_bounded(kind: str) -> None:
    """Count the token ids handed to decode: a small constant per token, not growing with the stream."""
    per_token = {}
    for length in (1000, 4000):
        tokenizer, ids = cost_stream(kind, length)
        counting = CountingTokenizer(tokenizer)
        detok = lab.IncrementalDetokenizer(counting, [], window=WINDOW)
        text = "".join(detok.push(i) for i in ids) + detok.flush()
        assert text == tokenizer.decode(ids), f"{kind}: the stream is not exact"
        per_token[length] = counting.ids_decoded / length
    assert per_token[4000] <= 4 * WINDOW, (
        f"{kind}: {per_token[4000]:.1f} ids decoded per token at 4000 tokens; the budget is {4 * WINDOW} "
        "(4 x window). Is something re-decoding the history?"
    )
    assert per_token[4000] <= per_token[1000] * 1.05, (
        f"{kind}: cost per token grows with the stream ({per_token[1000]:.1f} at 1000 tokens, "
        f"{per_token[4000]:.1f} at 4000): the fallback must stay local"
    )


# ---------------------------------------------------- task 3: flush and the prompt boundary


@pytest.mark.task(3)
def test_flush_releases_a_cut_off_character() -> None:
    detok = lab.IncrementalDetokenizer(BPE, BPE.encode("ok"))
    pushed = [detok.push(i) for i in BPE.encode(" x" + SHAKING)[:-1]]  # max_tokens ran out mid-emoji
    assert "".join(pushed) == " x"
    assert detok.flush() == "\ufffd", "the broken end is reported as U+FFFD, not dropped"


@pytest.mark.task(3)
def test_flush_after_complete_text_is_empty() -> None:
    _, tail = stream(BPE, [], BPE.encode("all done 🚀"))
    assert tail == ""


@pytest.mark.task(3)
@pytest.mark.parametrize("name", TOKENIZERS)
def test_prompt_ending_mid_character(name: str) -> None:
    """The character that straddles the prompt and the output belongs to the prompt (the formula says so)."""
    tokenizer = TOKENIZERS[name]
    ids = tokenizer.encode("Prompt 🫨 and then the answer 你好")
    cut = next(k for k in range(1, len(ids)) if tokenizer.decode(ids[:k]).endswith("\ufffd"))
    check_stream(tokenizer, ids[:cut], ids[cut:])


@pytest.mark.task(3)
@given(st.data())
def test_any_ids_any_prompt_split(data: st.DataObject) -> None:
    """Arbitrary ids: broken bytes, special tokens, both settings of skip_special_tokens."""
    tokenizer = data.draw(st.sampled_from([BYTES, BPE]), label="tokenizer")
    ids = data.draw(st.lists(st.integers(0, tokenizer.vocab_size - 1), max_size=24), label="ids")
    split = data.draw(st.integers(0, len(ids)), label="prompt length")
    skip = data.draw(st.booleans(), label="skip_special_tokens")
    check_stream(tokenizer, ids[:split], ids[split:], skip=skip)


@pytest.mark.task(3)
def test_fifty_random_slicings() -> None:
    text = "Streaming 服务器 🫨🚀 naïve café — 乱码字节 \ufffd Привет 😊 end."
    for name, tokenizer in TOKENIZERS.items():
        ids = tokenizer.encode(text * 3)
        for seed in range(50):
            rng = random.Random(seed)
            split = rng.randrange(len(ids))
            pushed, tail = stream(tokenizer, ids[:split], ids[split:])
            assert "".join(pushed) + tail == formula(tokenizer, ids[:split], ids[split:]), f"{name}, seed {seed}"


# ------------------------------------------------------- the peer: Hugging Face DecodeStream


def decode_stream_steps(prompt: Sequence[int], output: Sequence[int]) -> list[str]:
    decoder = DecodeStream(ids=list(prompt), skip_special_tokens=False)
    return [decoder.step(HF_RAW, i) or "" for i in output]


@pytest.mark.task(3)
@given(text=multilingual_text(), data=st.data())
def test_agrees_with_decode_stream_where_it_is_right(text: str, data: st.DataObject) -> None:
    """Valid text, a prompt that ends on a whole character: both stream the same pieces at the same tokens."""
    ids = HF_BPE.encode(text.replace("\ufffd", ""))
    clean_cuts = [k for k in range(len(ids) + 1) if not HF_BPE.decode(ids[:k]).endswith("\ufffd")]
    split = data.draw(st.sampled_from(clean_cuts), label="prompt length")
    prompt, output = ids[:split], ids[split:]
    pushed, _ = stream(HF_BPE, prompt, output)
    assert pushed == decode_stream_steps(prompt, output)


@pytest.mark.task(3)
def test_where_decode_stream_is_wrong_this_lab_is_right() -> None:
    # 1. A reply cut off mid-character: DecodeStream has no flush, the U+FFFD is lost.
    prompt, output = HF_BPE.encode("ok"), HF_BPE.encode(" x" + SHAKING)[:-1]
    pushed, tail = stream(HF_BPE, prompt, output)
    assert "".join(pushed) + tail == " x\ufffd"
    # 2. A prompt ending mid-character: DecodeStream shows the whole prompt.
    ids = HF_BPE.encode("Hello 🫨 world")
    cut = ids.index(HF_BPE.encode(SHAKING)[-1])
    pushed, tail = stream(HF_BPE, ids[:cut], ids[cut:])
    assert "".join(pushed) + tail == " world"
    # 3. Real U+FFFD characters: shown promptly, not all held until a clean token.
    output = HF_BPE.encode("\ufffd" * 20)
    detok = lab.IncrementalDetokenizer(HF_BPE, [])
    shown_before_last = "".join(detok.push(i) for i in output[:-3])
    assert shown_before_last.count("\ufffd") >= 18


@pytest.mark.control
def test_decode_stream_gaps_are_real() -> None:
    """The three gaps of tokenizers.decoders.DecodeStream that this lab closes, shown on the real library."""
    # 1. no flush: the cut-off character never comes out
    steps = decode_stream_steps(HF_BPE.encode("ok"), HF_BPE.encode(" x" + SHAKING)[:-1])
    assert "".join(steps) == " x" and not hasattr(DecodeStream, "flush")
    # 2. a prompt ending mid-character leaks into the output
    ids = HF_BPE.encode("Hello 🫨 world")
    cut = ids.index(HF_BPE.encode(SHAKING)[-1])
    assert "".join(decode_stream_steps(ids[:cut], ids[cut:])).startswith("Hello")
    # 3. real U+FFFD is held until a token that does not end in U+FFFD: all of it pending, re-decoded each step
    assert decode_stream_steps([], HF_BPE.encode("\ufffd" * 20)) == [""] * 60


# -------------------------------------------------------------------------- control


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
