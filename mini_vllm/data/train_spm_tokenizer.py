"""Train the course's Llama-style SentencePiece BPE (``spm``) from ``corpus.txt`` (+ a supplement).

Run from the repository root (needs the ``tokenizers`` library, a dev dependency):

    python mini_vllm/data/train_spm_tokenizer.py

It writes ``spm_tokenizer.json`` next to this script: the other big tokenizer family,
built the way Llama 2 and Mistral tokenizers are built with Hugging Face ``tokenizers``:

- a ``Metaspace`` pre-tokenizer: a space becomes ``▁`` and joins the word after it, and
  the first word of the text gets a ``▁`` of its own;
- ``BPE(byte_fallback=True)`` whose ordinary vocabulary holds all 256 byte tokens
  ``<0x00>`` .. ``<0xFF>`` (ids 3..258, right after the special tokens): a character the
  vocabulary lacks is spelled as the byte tokens of its UTF-8 encoding;
- the decoder chain Replace(``▁`` -> space), ByteFallback, Fuse, Strip(one leading space),
  so ``decode`` drops the first space of the decoded string.

Which characters get a vocabulary entry is decided here, not left to the trainer: a
character must occur at least ``MIN_CHAR_COUNT`` times in the corpus, and symbols and
emoji, Thai and Burmese never do. Everything else reaches the model through byte
fallback, which is the situation the streaming lessons are about. The script checks
those cases and refuses to write a file that breaks them.
"""

from __future__ import annotations

import json
import sys
import unicodedata
from collections import Counter
from pathlib import Path

from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers

HERE = Path(__file__).resolve().parent
OUTPUT = HERE / "spm_tokenizer.json"
# The shared corpus, plus a few lines of English so that "▁This" and "▁Hello" become pieces.
CORPUS_FILES = ("corpus.txt", "spm_corpus_extra.txt")
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
BYTE_TOKENS = [f"<0x{byte:02X}>" for byte in range(256)]
MERGED_VOCAB_SIZE = 768  # learned pieces (characters + merges), on top of specials and bytes
MIN_CHAR_COUNT = 3
# Scripts the lessons send through byte fallback on purpose.
FALLBACK_RANGES = ((0x0E00, 0x0E7F), (0x1000, 0x109F))  # Thai, Myanmar (Burmese)

# Text that must stream through byte fallback, and how: the lessons depend on these.
BYTE_FALLBACK_ONLY = ["🫨", "🚀", "สวัสดี", "မင်္ဂလာပါ"]
CJK_CANDIDATES = "服务器乱码字节"
THAI_WORD, BURMESE_WORD = "สวัสดี", "မင်္ဂလာပါ"
NEEDED_PIECES = ["▁This", "▁Hello"]  # the leading-space trap is shown with these


def in_alphabet(char: str, count: int) -> bool:
    """Whether ``char`` gets its own vocabulary entry (else it is spelled in bytes)."""
    code = ord(char)
    if any(low <= code <= high for low, high in FALLBACK_RANGES):
        return False
    category = unicodedata.category(char)
    if category.startswith("S") or category in ("Cf", "Mn", "Co", "Cs", "Cc"):
        return False  # emoji, symbols, joiners, variation selectors, controls
    return count >= MIN_CHAR_COUNT


def training_lines() -> list[str]:
    """Corpus lines with the special tokens and the byte-fallback characters removed."""
    lines = [line for name in CORPUS_FILES for line in (HERE / name).read_text(encoding="utf-8").splitlines()]
    for special in SPECIAL_TOKENS:
        lines = [line.replace(special, " ") for line in lines]
    counts = Counter("".join(lines))
    kept = {char for char, count in counts.items() if char == " " or in_alphabet(char, count)}
    return ["".join(char for char in line if char in kept) for line in lines]


def train() -> Tokenizer:
    learner = Tokenizer(models.BPE())
    learner.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first", split=True)
    trainer = trainers.BpeTrainer(vocab_size=MERGED_VOCAB_SIZE, show_progress=False)
    learner.train_from_iterator(training_lines(), trainer)
    learned = json.loads(learner.to_str())["model"]

    # Final layout, like Llama's: specials, then the 256 byte tokens, then the learned pieces.
    vocab = {token: i for i, token in enumerate([*SPECIAL_TOKENS, *BYTE_TOKENS])}
    for token, _ in sorted(learned["vocab"].items(), key=lambda item: item[1]):
        vocab.setdefault(token, len(vocab))
    merges = [tuple(pair) if isinstance(pair, list) else tuple(pair.split(" ", 1)) for pair in learned["merges"]]
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=merges, byte_fallback=True))
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first", split=True)
    tokenizer.decoder = decoders.Sequence([
        decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(), decoders.Strip(" ", 1, 0),
    ])
    tokenizer.add_special_tokens([AddedToken(text, special=True) for text in SPECIAL_TOKENS])
    return tokenizer


def check(tokenizer: Tokenizer) -> list[str]:
    """Every problem that would break a lesson (empty when the file is fit to ship)."""
    vocab = tokenizer.get_vocab()
    problems = [f"byte token {t} is not id {i + 3}" for i, t in enumerate(BYTE_TOKENS) if vocab.get(t) != i + 3]
    problems += [f"the piece {piece!r} is missing" for piece in NEEDED_PIECES if piece not in vocab]

    def tokens(text: str) -> list[str]:
        return tokenizer.encode(text, add_special_tokens=False).tokens

    for text in BYTE_FALLBACK_ONLY:
        # The first word gets a ▁ of its own; everything after it must be byte tokens.
        pieces = [t for t in tokens(text) if t != "▁"]
        if not pieces or any(t not in BYTE_TOKENS for t in pieces):
            problems.append(f"'{text}' must arrive only as <0xNN> byte tokens, got {pieces}")
    cjk_in_bytes = [c for c in CJK_CANDIDATES if all(t in BYTE_TOKENS for t in tokens(c) if t != "▁")]
    if len(cjk_in_bytes) < 3:
        problems.append(f"at least 3 of {CJK_CANDIDATES} must go through byte fallback, got {cjk_in_bytes}")
    for word in (THAI_WORD, BURMESE_WORD):
        if len(tokens(word)) < 4:
            problems.append(f"{word!r} must be split across several tokens, got {tokens(word)}")
    for text in ("This is it", "Hello world", " This", "a  b ", "你好 🫨"):
        ids = tokenizer.encode(text, add_special_tokens=False).ids
        if tokenizer.decode(ids) != text.removeprefix(" "):
            problems.append(f"{text!r} does not survive encode + decode: {tokenizer.decode(ids)!r}")
    return problems


def main() -> int:
    tokenizer = train()
    problems = check(tokenizer)
    if problems:
        print(f"refusing to write {OUTPUT.name}:\n  " + "\n  ".join(problems), file=sys.stderr)
        return 1
    tokenizer.save(str(OUTPUT), pretty=True)
    print(f"wrote {OUTPUT} ({tokenizer.get_vocab_size()} tokens)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
