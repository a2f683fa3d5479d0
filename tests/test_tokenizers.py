"""mini_vllm's tokenizers, checked against the real Hugging Face ``tokenizers`` library."""

from __future__ import annotations

import importlib.util
import json
import random
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import mini_vllm
from mini_vllm import BPETokenizer, ByteTokenizer, SentencePieceBPETokenizer, Tokenizer, load_tokenizer
from mini_vllm.serving import build_engine
from mini_vllm.testing.strategies import MULTILINGUAL_CHARS, multilingual_text
from mini_vllm.tokenizers.base import check_token_id
from mini_vllm.tokenizers.bpe import SHIPPED_TOKENIZER, byte_to_unicode
from mini_vllm.tokenizers.hf import HFTokenizer, hf_bpe_tokenizer, hf_byte_tokenizer, hf_spm_tokenizer
from mini_vllm.tokenizers.spm import SHIPPED_SPM_TOKENIZER

BYTES = ByteTokenizer()
BPE = BPETokenizer.from_file()
HF_BPE = hf_bpe_tokenizer()
SPM = SentencePieceBPETokenizer.from_file()
HF_SPM = hf_spm_tokenizer()
CORPUS = (SHIPPED_TOKENIZER.parent / "corpus.txt").read_text(encoding="utf-8").splitlines()
ALL_TOKENIZERS = {"byte": BYTES, "bpe": BPE, "spm": SPM, "hf-bpe": HFTokenizer(HF_BPE),
                  "hf-byte": HFTokenizer(hf_byte_tokenizer()), "hf-spm": HFTokenizer(HF_SPM),
                  # real vocabularies (tests/test_real_tokenizers.py has the rest)
                  "mistral": load_tokenizer("mistral"), "tekken": load_tokenizer("tekken")}


def multilingual_samples(count: int = 200) -> list[str]:
    """Corpus lines plus seeded mixes of their words, spaces, specials and odd characters."""
    words = [w for line in CORPUS for w in line.split()]
    rng = random.Random(16)
    extras = [*MULTILINGUAL_CHARS, "  ", "\n\n", "\t", "<|im_end|>", "'s", "'ll", "\u00ad", "\r\n", "123", "🫨🫨"]
    mixes = ["".join(rng.choice([rng.choice(words) + " ", rng.choice(extras)]) for _ in range(rng.randint(1, 12)))
             for _ in range(count)]
    return CORPUS + mixes


@pytest.mark.parametrize("text", multilingual_samples(), ids=range(len(multilingual_samples())))
def test_bpe_encodes_and_decodes_exactly_like_hugging_face(text: str) -> None:
    ids = BPE.encode(text)
    assert ids == HF_BPE.encode(text).ids
    assert BPE.decode(ids) == HF_BPE.decode(ids, skip_special_tokens=False) == text
    assert BPE.decode(ids, skip_special_tokens=True) == HF_BPE.decode(ids, skip_special_tokens=True)


@given(multilingual_text(max_size=60))
def test_bpe_matches_hugging_face_on_any_text(text: str) -> None:
    ids = BPE.encode(text)
    assert ids == HF_BPE.encode(text).ids
    assert BPE.decode(ids) == text


@given(st.lists(st.integers(0, BPE.vocab_size - 1), max_size=30))
def test_bpe_decodes_any_ids_like_hugging_face(ids: list[int]) -> None:
    """Arbitrary id sequences include broken UTF-8: both sides must agree on the U+FFFDs."""
    for skip in (False, True):
        assert BPE.decode(ids, skip_special_tokens=skip) == HF_BPE.decode(ids, skip_special_tokens=skip)


def test_shipped_bpe_splits_characters_the_way_the_labs_need() -> None:
    def pieces(text: str) -> list[bytes]:
        return [BPE.decode_single_token_bytes(i) for i in BPE.encode(text)]

    assert pieces("🫨") == [b"\xf0\x9f", b"\xab", b"\xa8"]  # Qwen3's [9284, 104, 101] shape
    assert len(pieces("🚀")) == 2
    split_cjk = [c for c in "服务器乱码字节" if len(pieces(c)) > 1]
    assert len(split_cjk) >= 3, "some CJK characters must arrive in several tokens"


def test_training_script_reproduces_the_shipped_tokenizer() -> None:
    script = SHIPPED_TOKENIZER.parent / "train_tokenizer.py"
    spec = importlib.util.spec_from_file_location("train_tokenizer", script)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    retrained = json.loads(module.train().to_str())["model"]
    shipped = json.loads(Path(SHIPPED_TOKENIZER).read_text(encoding="utf-8"))["model"]
    assert retrained["vocab"] == shipped["vocab"] and retrained["merges"] == shipped["merges"]
    assert module.check(module.train()) == []


def test_byte_map_is_gpt2s() -> None:
    mapping = byte_to_unicode()
    assert len(set(mapping.values())) == 256
    assert mapping[ord("A")] == "A" and mapping[0x20] == "Ġ" and mapping[0x0A] == "Ċ"


@given(multilingual_text())
def test_byte_tokenizer_is_utf8(text: str) -> None:
    ids = BYTES.encode(text)
    assert BYTES.decode(ids) == text
    if not any(special in text for special in BYTES.convert_ids_to_tokens(BYTES.all_special_ids)):
        assert ids == list(text.encode("utf-8"))


def test_byte_tokenizer_specials() -> None:
    ids = BYTES.encode("<|im_start|>hi<|im_end|><|endoftext|>")
    assert ids == [257, ord("h"), ord("i"), 258, 256]
    assert BYTES.eos_token_id == 256 and BYTES.all_special_ids == [256, 257, 258]
    assert BYTES.decode(ids) == "<|im_start|>hi<|im_end|><|endoftext|>"
    assert BYTES.decode(ids, skip_special_tokens=True) == "hi"
    assert BYTES.convert_ids_to_tokens([0xF0, 256]) == ["<0xF0>", "<|endoftext|>"]


@given(st.lists(st.integers(0, 258), max_size=30))
def test_byte_tokenizer_agrees_with_a_real_byte_level_tokenizer(ids: list[int]) -> None:
    hf = hf_byte_tokenizer()
    for skip in (False, True):
        assert BYTES.decode(ids, skip_special_tokens=skip) == hf.decode(ids, skip_special_tokens=skip)


@pytest.mark.parametrize("name", ALL_TOKENIZERS)
@pytest.mark.parametrize("bad_id", [-1, 10**6, "7", 2.0, None, True], ids=repr)
def test_ids_outside_the_vocabulary_raise_value_error_naming_the_id(name: str, bad_id: object) -> None:
    tokenizer: Tokenizer = ALL_TOKENIZERS[name]
    calls = {
        "decode": lambda: tokenizer.decode([5, bad_id]),  # type: ignore[list-item]
        "decode_single_token_bytes": lambda: tokenizer.decode_single_token_bytes(bad_id),  # type: ignore[arg-type]
        "convert_ids_to_tokens": lambda: tokenizer.convert_ids_to_tokens([bad_id]),  # type: ignore[list-item]
    }
    for call_name, call in calls.items():
        with pytest.raises(ValueError, match="token id") as raised:
            call()
        assert str(bad_id) in str(raised.value), f"{name}.{call_name}: {raised.value}"


class IntLookalike:
    """Hashes, compares and indexes like the int 5, as numpy's ints do: the real library reads it as token 5."""

    def __index__(self) -> int:
        return 5

    def __hash__(self) -> int:
        return hash(5)

    def __eq__(self, other: object) -> bool:
        return bool(other == 5)

    def __repr__(self) -> str:
        return "IntLookalike()"


# Every kind of id the course refuses: some the real library takes silently (True as 1, 10**6 skipped, the
# look-alike as 5), some that pass HFTokenizer's set lookups in C (True, False, 2.0, the look-alike), so that
# only its exact-type check stops them.
BAD_IDS = [-1, 10**6, 2**40, "7", 2.0, 5.5, None, True, False, IntLookalike(), [5]]


@pytest.mark.parametrize("bad_id", BAD_IDS, ids=repr)
@pytest.mark.parametrize("where", ["alone", "first", "middle", "last"])
def test_hf_tokenizer_refuses_a_bad_id_anywhere_in_a_window_as_check_token_id_does(bad_id: object, where: str) -> None:
    """However decode checks a window (in C for the usual case, then id by id), a bad id gets the error
    ``check_token_id`` gives it: the same type, the same message, naming the first bad id."""
    tokenizer = HFTokenizer(HF_BPE)
    with pytest.raises(ValueError) as expected:
        check_token_id(bad_id, tokenizer.vocab_size)
    window = {"alone": [bad_id], "first": [bad_id, 5, 1], "middle": [5, bad_id, 1], "last": [5, 1, bad_id]}[where]
    with pytest.raises(ValueError) as raised:
        tokenizer.decode(window)  # type: ignore[arg-type]
    assert str(raised.value) == str(expected.value), f"decode({window!r}): {raised.value}"
    if bad_id is True or bad_id == 10**6 or isinstance(bad_id, IntLookalike):
        HF_BPE.decode(window, skip_special_tokens=False)  # type: ignore[arg-type]  # the real library takes it


def test_hf_tokenizer_checks_every_window_a_stream_sends() -> None:
    """A streaming detokenizer sends the window it sent last plus one id. Each window is checked whole: an id
    changed since an earlier call, to something equal to it (True for 1, a look-alike for 5), is refused, whether
    the caller sends a new list or the same list again, so no cache of checked windows may trust equality."""
    tokenizer = HFTokenizer(HF_BPE)
    window: list[object] = [5, 1, 7]
    expected = tokenizer.decode(window)  # type: ignore[arg-type]
    lookalikes: list[tuple[int, object]] = [(1, True), (0, IntLookalike()), (2, 7.0)]
    for position, lookalike in lookalikes:
        changed = [*window]
        changed[position] = lookalike
        assert changed == window
        for sent in ([*changed, 8], changed):
            with pytest.raises(ValueError, match=re.escape(f"token id {lookalike!r} is not an int")):
                tokenizer.decode(sent)  # type: ignore[arg-type]
        assert tokenizer.decode(window) == expected  # type: ignore[arg-type]  # (the unchanged window still is fine)
    window[1] = True  # the same list object, changed in place after it was decoded
    with pytest.raises(ValueError, match="token id True is not an int"):
        tokenizer.decode(window)  # type: ignore[arg-type]


def test_hf_tokenizer_takes_int_subclasses_but_bool_as_check_token_id_does() -> None:
    """``check_token_id`` refuses bool alone of int's subclasses; an IntEnum member is its value (as it was)."""
    from enum import IntEnum

    class Token(IntEnum):
        FIVE = 5

    tokenizer = HFTokenizer(HF_BPE)
    assert tokenizer.decode([Token.FIVE, 1]) == tokenizer.decode([5, 1])


@pytest.mark.parametrize("name", ALL_TOKENIZERS)
def test_every_tokenizer_follows_the_protocol(name: str) -> None:
    tokenizer = ALL_TOKENIZERS[name]
    assert isinstance(tokenizer, Tokenizer)
    assert tokenizer.eos_token_id in tokenizer.all_special_ids
    text = "héllo 你好 🚀"
    ids = tokenizer.encode(text)
    assert tokenizer.decode(ids) == text
    raw = b"".join(tokenizer.decode_single_token_bytes(i) for i in ids)
    # The SentencePiece family gives the first word a space of its own, which decode strips again.
    sentencepiece = name.endswith("spm") or name == "mistral"
    assert raw == text.encode("utf-8") or (sentencepiece and raw == b" " + text.encode("utf-8"))


# ------------------------------------------------------- the SentencePiece family (spm)

THAI, BURMESE = "สวัสดีครับ วันนี้อากาศดีมาก", "မင်္ဂလာပါ နေကောင်းလား"
SPACES = [" ", "  ", "   ", " lead", "  two leading", "trail ", "trail  ", " both ", "a  b   c", "\t tab", " \n "]


def spm_samples(count: int = 240) -> list[str]:
    """Multilingual strings that stress the Metaspace rules: Thai, Burmese, emoji, odd spaces, specials."""
    words = [w for line in CORPUS for w in line.split()] + THAI.split() + BURMESE.split()
    rng = random.Random(10)
    extras = [*MULTILINGUAL_CHARS, *SPACES, "<|im_start|>", "<|im_end|>", "<|endoftext|>", "\ufffd", "🫨🚀",
              "\u00ad", "\r\n", "ThisThis", "▁", "<0x41>"]
    mixes = ["".join(rng.choice([rng.choice(words) + rng.choice(["", " ", "  "]), rng.choice(extras)])
                     for _ in range(rng.randint(1, 10))) for _ in range(count)]
    return [THAI, BURMESE, *SPACES, *CORPUS[:40], *mixes]


SPM_SAMPLES = spm_samples()


def test_there_are_enough_spm_samples() -> None:
    assert len(SPM_SAMPLES) >= 200


@pytest.mark.parametrize("text", SPM_SAMPLES, ids=range(len(SPM_SAMPLES)))
def test_spm_encodes_and_decodes_exactly_like_hugging_face(text: str) -> None:
    ids = SPM.encode(text)
    assert ids == HF_SPM.encode(text, add_special_tokens=False).ids, f"encode({text!r})"
    for skip in (False, True):
        assert SPM.decode(ids, skip_special_tokens=skip) == HF_SPM.decode(ids, skip_special_tokens=skip), (
            f"decode(encode({text!r}), skip_special_tokens={skip})")


@given(multilingual_text(max_size=60))
def test_spm_matches_hugging_face_on_any_text(text: str) -> None:
    ids = SPM.encode(text)
    assert ids == HF_SPM.encode(text, add_special_tokens=False).ids
    # The family's one lossy step: the decoder strips the first space of the text.
    assert SPM.decode(ids) == HF_SPM.decode(ids, skip_special_tokens=False) == text.removeprefix(" ")


@given(st.lists(st.integers(0, SPM.vocab_size - 1), max_size=30))
def test_spm_decodes_any_ids_like_hugging_face(ids: list[int]) -> None:
    """Arbitrary ids: runs of byte tokens that are not UTF-8 turn into one U+FFFD per byte, on both sides."""
    for skip in (False, True):
        assert SPM.decode(ids, skip_special_tokens=skip) == HF_SPM.decode(ids, skip_special_tokens=skip)


def test_spm_strips_exactly_one_leading_space() -> None:
    this = SPM.encode("This")
    assert SPM.convert_ids_to_tokens(this) == ["▁This"]
    assert SPM.decode(this) == "This", "alone, ▁This decodes without its space"
    assert SPM.decode(this * 2) == "This This", "inside a longer decode the same token keeps it"
    assert SPM.decode(SPM.encode("  x")) == HF_SPM.decode(SPM.encode("  x")) == " x"


def test_spm_token_bytes_are_the_raw_bytes_not_decode() -> None:
    """decode_single_token_bytes is the same idea in every family; decode([id]) is not."""
    hello, = SPM.encode("Hello")
    assert SPM.decode_single_token_bytes(hello) == b" Hello" and SPM.decode([hello]) == "Hello"
    byte_e5 = SPM.convert_ids_to_tokens(range(SPM.vocab_size)).index("<0xE5>")
    assert byte_e5 == 0xE5 + 3, "like Llama 2: a byte token's id is its value + 3"
    assert SPM.decode_single_token_bytes(byte_e5) == b"\xe5" and SPM.decode([byte_e5]) == "\ufffd"
    hf = HFTokenizer(HF_SPM)
    for token_id in range(SPM.vocab_size):
        assert hf.decode_single_token_bytes(token_id) == SPM.decode_single_token_bytes(token_id), token_id


@pytest.mark.parametrize("text", [THAI, BURMESE, "🫨 🚀", "服务器乱码字节", "你好 🫨 สวัสดี"])
def test_spm_token_bytes_concatenate_to_the_text(text: str) -> None:
    ids = SPM.encode(text)
    assert b"".join(SPM.decode_single_token_bytes(i) for i in ids) == (" " + text).encode("utf-8"), (
        "the bytes include the ▁ the first word was given")


def test_shipped_spm_sends_the_lesson_characters_through_byte_fallback() -> None:
    def tokens(text: str) -> list[str]:
        return [t for t in SPM.convert_ids_to_tokens(SPM.encode(text)) if t != "▁"]

    for text in ("🫨", "🚀", "สวัสดี", "မင်္ဂလာပါ"):
        assert all(t.startswith("<0x") for t in tokens(text)), f"{text} must arrive as <0xNN> tokens: {tokens(text)}"
    assert len([c for c in "服务器乱码字节" if all(t.startswith("<0x") for t in tokens(c))]) >= 3
    assert tokens("你好") == ["▁你好"], "common CJK stays whole, so both cases are in one stream"


def test_spm_training_script_reproduces_the_shipped_file() -> None:
    script = SHIPPED_SPM_TOKENIZER.parent / "train_spm_tokenizer.py"
    spec = importlib.util.spec_from_file_location("train_spm_tokenizer", script)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    retrained = module.train()
    assert json.loads(retrained.to_str()) == json.loads(SHIPPED_SPM_TOKENIZER.read_text(encoding="utf-8"))
    assert module.check(retrained) == []


def test_spm_training_script_refuses_a_file_without_the_lesson_cases() -> None:
    script = SHIPPED_SPM_TOKENIZER.parent / "train_spm_tokenizer.py"
    spec = importlib.util.spec_from_file_location("train_spm_tokenizer", script)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    too_big = module.train()
    too_big.add_tokens(["🫨", "ThisIsNew"])  # 🫨 would no longer need byte fallback
    assert any("🫨" in problem for problem in module.check(too_big))


@pytest.mark.parametrize("name", ["byte", "bpe", "spm"])
def test_load_tokenizer_is_the_one_door(name: str) -> None:
    kinds = {"byte": ByteTokenizer, "bpe": BPETokenizer, "spm": SentencePieceBPETokenizer}
    assert isinstance(mini_vllm.load_tokenizer(name), kinds[name])
    assert name in mini_vllm.TOKENIZER_FAMILIES
    assert isinstance(build_engine(name).tokenizer, kinds[name])


def test_load_tokenizer_names_the_choices() -> None:
    with pytest.raises(ValueError, match="byte, bpe, spm"):
        load_tokenizer("llama")


# ----------------------------------------------------------------- encode_ordinary (lab-10's text path)

ORDINARY_FAMILIES = list(mini_vllm.TOKENIZER_FAMILIES)


@pytest.mark.parametrize("name", ORDINARY_FAMILIES)
@given(text=st.lists(st.sampled_from(["<|im_end|>", "<|im_start|>", "<s>", "</s>", "[INST]", "[/INST]", "<unk>",
                                      "hi", " ", "\n", "é", "🫨"]), max_size=8).map("".join), at_start=st.booleans())
def test_encode_ordinary_never_matches_a_special_string(name: str, text: str, at_start: bool) -> None:
    tokenizer = load_tokenizer(name)
    ids = tokenizer.encode_ordinary(text, at_start=at_start)  # type: ignore[attr-defined]
    assert not set(ids) & set(tokenizer.all_special_ids), f"{name}: special ids in encode_ordinary({text!r})"
    spelled = b"".join(tokenizer.decode_single_token_bytes(i) for i in ids).decode("utf-8")
    dummy = at_start and name in ("spm", "mistral") and text
    assert spelled in ({text, " " + text} if dummy else {text}), f"{name}: {text!r} spelled as {spelled!r}"


@pytest.mark.parametrize("name", ORDINARY_FAMILIES)
@pytest.mark.parametrize("text", ["Hello world", "日本語 and 🫨", " leading space"])
def test_encode_ordinary_is_encode_on_text_without_special_strings(name: str, text: str) -> None:
    tokenizer = load_tokenizer(name)
    assert tokenizer.encode_ordinary(text) == tokenizer.encode(text), (  # type: ignore[attr-defined]
        f"{name}: at the start of a text, encode_ordinary and encode agree when no special string is written")


def test_lab_10_readme_example_of_the_two_encoders() -> None:
    """The lab-10 README's Background: encode matches <|im_end|>, encode_ordinary writes its characters."""
    assert BYTES.encode("a<|im_end|>") == [97, 258], "encode matches the special string"
    assert BYTES.encode_ordinary("a<|im_end|>") == [97, 60, 124, 105, 109, 95, 101, 110, 100, 124, 62], (
        "encode_ordinary writes its characters")
