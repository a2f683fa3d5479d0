"""The real vocabularies: Mistral 7B v0.1's SentencePiece model and Tekken, from the mistral-common wheel.

``mistral`` and ``tekken`` are thin adapters over the vendor libraries (sentencepiece and tiktoken,
through mistral-common). Which oracle checks what:

- decode, both: Hugging Face ``tokenizers``, rebuilt at test time from the wheel's own files
  (``mini_vllm.tokenizers.hf.hf_mistral_tokenizer`` / ``hf_tekken_tokenizer``, with the decoder Hugging
  Face uses for each family);
- encode, mistral: the same Hugging Face copy, converted as transformers converts a SentencePiece
  model (merges read off the piece scores), for text without special tokens;
- encode, tekken: the vendor library itself (tiktoken). Rebuilding Tekken's merges from its ranks
  would take seconds per process, so its copy is decode-only, and encoding is checked by round
  trips, by the raw token bytes spelling the text, and by the splits the lessons rely on.
"""

from __future__ import annotations

import socket

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

import mini_vllm
from mini_vllm import Tokenizer, load_tokenizer
from mini_vllm.serving import build_engine
from mini_vllm.testing.strategies import multilingual_text
from mini_vllm.tokenizers.hf import hf_mistral_tokenizer, hf_tekken_tokenizer
from mini_vllm.tokenizers.mistral import MistralTokenizer, TekkenTokenizer
from mini_vllm.toy_model import ToyModel
from mini_vllm.toy_scripts import SCRIPTS

MISTRAL, TEKKEN = load_tokenizer("mistral"), load_tokenizer("tekken")
REAL = {"mistral": MISTRAL, "tekken": TEKKEN}
HF = {"mistral": hf_mistral_tokenizer(), "tekken": hf_tekken_tokenizer()}
SHAKING = "🫨"
BURMESE = "ပုံပြင်လေးပြောပြပါ"
SAMPLES = [
    "naïve café — 你好 服务器 乱码 🚀🫨😊 字節 สวัสดีครับ วันนี้อากาศดีมาก",
    BURMESE + " " + "မင်္ဂလာပါ နေကောင်းလား",
    "こんにちは！今日の東京は晴れです。🗾 Привет, мир! 한국어 🇫🇷👩‍💻",
    "  two leading, trailing  \n\n\ttabs\r\nand a real \ufffd too ",
    "<s>[INST] What is 2 + 2? [/INST]The answer is 4.</s>",
    "<|im_start|>assistant\n<think>\nplan</think>\n\n<tool_call>{\"a\": 1}</tool_call>",
]


def raw_text(tokenizer: Tokenizer, ids: list[int]) -> bytes:
    return b"".join(tokenizer.decode_single_token_bytes(i) for i in ids)


# ------------------------------------------------------------------ the protocol


@pytest.mark.parametrize("name", REAL)
def test_the_one_door_loads_each_real_vocabulary_once(name: str) -> None:
    kinds = {"mistral": MistralTokenizer, "tekken": TekkenTokenizer}
    assert name in mini_vllm.TOKENIZER_FAMILIES
    assert isinstance(load_tokenizer(name), kinds[name])
    assert load_tokenizer(name) is load_tokenizer(name), "131k ids: load once per process"
    assert build_engine(name).tokenizer is REAL[name]


@pytest.mark.parametrize("name", REAL)
def test_follows_the_protocol(name: str) -> None:
    tokenizer = REAL[name]
    assert isinstance(tokenizer, Tokenizer)
    assert tokenizer.vocab_size == {"mistral": 32_000, "tekken": 131_072}[name]
    assert tokenizer.convert_ids_to_tokens([tokenizer.eos_token_id]) == ["</s>"]
    assert tokenizer.eos_token_id in tokenizer.all_special_ids
    ids = tokenizer.encode("héllo 你好 🚀")
    assert len(tokenizer.convert_ids_to_tokens(ids)) == len(ids)
    with pytest.raises(ValueError, match="token id 131072"):
        tokenizer.decode([131_072], skip_special_tokens=True)  # checked before the vendor drops specials


# Bad ids: test_tokenizers.py's test_ids_outside_the_vocabulary_raise_value_error_naming_the_id runs on both.


@pytest.mark.parametrize("name", REAL)
def test_special_tokens_written_in_the_text_are_special_and_text_after_them_continues(name: str) -> None:
    """A chat template writes special tokens as text. What follows one continues a sentence: no extra ▁."""
    tokenizer = REAL[name]
    ids = tokenizer.encode("</s>Hello there<s> x")
    assert ids[0] == tokenizer.eos_token_id
    assert tokenizer.convert_ids_to_tokens(ids[1:2])[0] in ("Hello", "▁Hello" if name == "tekken" else "Hello")
    assert tokenizer.decode(ids) == "</s>Hello there<s> x"
    assert tokenizer.decode(ids, skip_special_tokens=True) == "Hello there x"


# ------------------------------------------------------- the splits the lessons rely on


def test_mistral_spells_shaking_face_with_four_byte_tokens() -> None:
    ids = MISTRAL.encode(SHAKING)
    assert MISTRAL.convert_ids_to_tokens(ids) == ["▁", "<0xF0>", "<0x9F>", "<0xAB>", "<0xA8>"]
    assert [MISTRAL.decode_single_token_bytes(i) for i in ids[1:]] == [b"\xf0", b"\x9f", b"\xab", b"\xa8"]
    assert [MISTRAL.decode([i]) for i in ids[1:]] == ["\ufffd"] * 4, "a lone byte token decodes to U+FFFD"
    hello = MISTRAL.convert_ids_to_tokens(MISTRAL.encode("こんにちは"))
    assert hello == ["▁", "こ", "ん", "に", "ち", "は"], "Japanese kana are single-character pieces"


def test_tekken_splits_space_shaking_face_into_three_tokens() -> None:
    """The shape of Qwen3's [9284, 104, 101]: each token alone decodes to U+FFFD."""
    ids = TEKKEN.encode(" " + SHAKING)
    assert [TEKKEN.decode_single_token_bytes(i) for i in ids] == [b" \xf0\x9f", b"\xab", b"\xa8"]
    assert [TEKKEN.decode([i]) for i in ids] == [" \ufffd", "\ufffd", "\ufffd"]
    assert TEKKEN.decode(ids) == " " + SHAKING


def test_tekken_tokens_straddle_burmese_characters() -> None:
    """One token holds the end of one character and the start of the next: cut by bytes, never by tokens."""
    pieces = [TEKKEN.decode_single_token_bytes(i) for i in TEKKEN.encode(BURMESE)]
    straddling = [p for p in pieces if 0x80 <= p[0] < 0xC0 and any(b >= 0xC0 for b in p)]
    assert b"\x95\xe1\x80\xbc" in straddling, [p.hex(" ") for p in pieces]
    assert b"".join(pieces).decode("utf-8") == BURMESE


# ------------------------------------------------------------ decode against the oracle


@pytest.mark.parametrize("name", REAL)
@pytest.mark.parametrize("text", SAMPLES, ids=range(len(SAMPLES)))
def test_agrees_with_hugging_face_on_multilingual_text(name: str, text: str) -> None:
    tokenizer = REAL[name]
    ids = tokenizer.encode(text)
    assert tokenizer.decode(ids) == text
    for skip in (False, True):
        assert tokenizer.decode(ids, skip_special_tokens=skip) == HF[name].decode(ids, skip_special_tokens=skip)
    if name == "mistral" and not set(ids) & set(tokenizer.all_special_ids):
        assert ids == HF[name].encode(text, add_special_tokens=False).ids


@pytest.mark.parametrize("name", REAL)
@given(text=multilingual_text(max_size=60))
@example(text=" lead and trail ")
@example(text="\ufffd" + SHAKING)
def test_any_text_round_trips_and_decodes_like_hugging_face(name: str, text: str) -> None:
    tokenizer = REAL[name]
    ids = tokenizer.encode(text)
    assert tokenizer.decode(ids) == text == HF[name].decode(ids, skip_special_tokens=False)
    if not set(ids) & set(tokenizer.all_special_ids):
        assert raw_text(tokenizer, ids).decode("utf-8").removeprefix(" " if name == "mistral" else "") == text


@given(text=multilingual_text(max_size=60))
@example(text="   three leading spaces, one trailing ")
def test_mistral_encodes_like_hugging_face(text: str) -> None:
    """Text without special tokens: the adapter's ids (sentencepiece's) equal the converted Hugging Face copy's."""
    text = text.replace("<s>", "").replace("</s>", "").replace("<unk>", "")
    assert MISTRAL.encode(text) == HF["mistral"].encode(text, add_special_tokens=False).ids


@given(ids=st.lists(st.integers(TEKKEN.all_special_ids[-1] + 1, TEKKEN.vocab_size - 1), max_size=30))
def test_tekken_decodes_any_ordinary_ids_like_hugging_face(ids: list[int]) -> None:
    """Broken UTF-8 too: tiktoken and Hugging Face's ByteLevel both write Python's U+FFFDs."""
    assert TEKKEN.decode(ids) == HF["tekken"].decode(ids) == raw_text(TEKKEN, ids).decode("utf-8", "replace")


def test_where_the_vendors_differ_from_hugging_face_on_broken_bytes() -> None:
    """Not a bug to fix: each library has its own rule for a run of byte tokens that is not valid UTF-8.

    SentencePiece keeps the valid characters of the run and writes one U+FFFD per bad byte;
    Hugging Face's ByteFallback writes one U+FFFD per byte of the whole run. Tekken (tiktoken)
    decodes each stretch between special tokens on its own, where Hugging Face joins the bytes
    around a skipped special token. The course follows the vendor: that is what a server runs.
    """
    e_acute_then_cut = [HF["mistral"].token_to_id(f"<0x{byte:02X}>") for byte in b"\xc3\xa9\xf0"]  # é, cut-off 🫨
    assert MISTRAL.decode(e_acute_then_cut) == "é\ufffd"
    assert HF["mistral"].decode(e_acute_then_cut) == "\ufffd" * 3
    split = TEKKEN.encode(" " + SHAKING)
    around_a_special = [split[0], TEKKEN.eos_token_id, *split[1:]]
    assert TEKKEN.decode(around_a_special, skip_special_tokens=True) == " \ufffd\ufffd\ufffd"
    assert HF["tekken"].decode(around_a_special, skip_special_tokens=True) == " " + SHAKING


# ------------------------------------------------------------ the toy model speaks them


@pytest.mark.parametrize("name", REAL)
def test_every_scripted_reply_encodes_and_decodes_after_a_chat_prompt(name: str) -> None:
    tokenizer = REAL[name]
    model = ToyModel(tokenizer)
    prompt = tokenizer.encode("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n")
    for keyword, script in SCRIPTS.items():
        reply = model.reply_ids(keyword, prompt)
        assert reply[-1] == tokenizer.eos_token_id
        whole = tokenizer.decode([*prompt, *reply], skip_special_tokens=True)
        assert whole[len(tokenizer.decode(prompt, skip_special_tokens=True)) :] == script, keyword


# ------------------------------------------------------------ nothing is downloaded


@pytest.mark.parametrize("kind", [MistralTokenizer, TekkenTokenizer], ids=["mistral", "tekken"])
def test_loading_opens_no_network_connection(kind: type, monkeypatch: pytest.MonkeyPatch) -> None:
    """The files ship in the mistral-common wheel: a fresh load with every socket refused still works."""

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"a tokenizer load tried the network: {args}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    tokenizer = kind()
    assert tokenizer.decode(tokenizer.encode("ok 🫨")) == "ok 🫨"
