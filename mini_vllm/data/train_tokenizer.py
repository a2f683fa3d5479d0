"""Train the course's tiny byte-level BPE tokenizer from ``corpus.txt``.

Run from the repository root (needs the ``tokenizers`` library, a dev dependency):

    python mini_vllm/data/train_tokenizer.py

It writes ``tokenizer.json`` next to this script. The vocabulary is kept small on
purpose: a tokenizer with few merges splits rare characters into several tokens,
which is exactly the situation the streaming labs are about. The script checks the
splits the labs rely on and refuses to write a file that breaks them.
"""

from __future__ import annotations

import sys
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

HERE = Path(__file__).resolve().parent
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
VOCAB_SIZE = 1024

# text -> the UTF-8 bytes of each token it must encode to (the lessons depend on these).
REQUIRED_SPLITS: dict[str, list[bytes]] = {
    "🫨": [b"\xf0\x9f", b"\xab", b"\xa8"],  # the same shape as Qwen3's [9284, 104, 101]
}
REQUIRED_TOKEN_COUNTS: dict[str, int] = {"🚀": 2}


def train() -> Tokenizer:
    tokenizer = Tokenizer(models.BPE())
    # GPT-2 style: split on the GPT-2 regex, map bytes to printable characters.
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train([str(HERE / "corpus.txt")], trainer)
    return tokenizer


def token_bytes(tokenizer: Tokenizer, text: str) -> list[bytes]:
    """The raw bytes behind each token of ``text`` (decoding each token alone)."""
    byte_of_char = {c: b for b, c in enumerate(_gpt2_chars())}
    tokens = tokenizer.encode(text).tokens
    return [bytes(byte_of_char[c] for c in token) for token in tokens]


def _gpt2_chars() -> list[str]:
    # Local copy so the script needs nothing from mini_vllm; the package has its own.
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + list(range(0xAE, 0xFF + 1))
    chars: list[str] = []
    extra = 0
    for byte in range(256):
        if byte in printable:
            chars.append(chr(byte))
        else:
            chars.append(chr(256 + extra))
            extra += 1
    return chars


def check(tokenizer: Tokenizer) -> list[str]:
    problems = []
    for text, want in REQUIRED_SPLITS.items():
        got = token_bytes(tokenizer, text)
        if got != want:
            problems.append(f"{text!r} splits as {got}, lessons need {want}")
    for text, count in REQUIRED_TOKEN_COUNTS.items():
        got = token_bytes(tokenizer, text)
        if len(got) != count:
            problems.append(f"{text!r} splits as {got}, lessons need {count} tokens")
    cjk_split = [c for c in "你好服务器词元乱码字节" if len(token_bytes(tokenizer, c)) > 1]
    if not cjk_split:
        problems.append("no CJK character splits into several tokens")
    return problems


def main() -> int:
    tokenizer = train()
    problems = check(tokenizer)
    if problems:
        print("refusing to write tokenizer.json:\n  " + "\n  ".join(problems), file=sys.stderr)
        return 1
    tokenizer.save(str(HERE / "tokenizer.json"), pretty=True)
    print(f"wrote {HERE / 'tokenizer.json'} ({tokenizer.get_vocab_size()} tokens)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
