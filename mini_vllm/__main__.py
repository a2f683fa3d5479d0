"""``.venv/bin/python -m mini_vllm serve [--port N] [--tokenizer byte|bpe|spm|mistral|tekken] [--delay SECONDS]
[--no-reasoning] [--reasoning-field reasoning|reasoning_content] [--tokens-per-step K]``."""

from __future__ import annotations

import argparse

from mini_vllm.labs import describe_choice
from mini_vllm.tokenizers.families import TOKENIZER_FAMILIES


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m mini_vllm", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("serve", help="the OpenAI-compatible server, with the pipeline LAB_IMPL selects")
    run.add_argument("--host", default="127.0.0.1", help="interface to bind (default: 127.0.0.1, this machine only)")
    run.add_argument("--port", type=int, default=8000)
    run.add_argument("--tokenizer", choices=TOKENIZER_FAMILIES, default="bpe",
                     help="byte: one token per byte; bpe: GPT-2 style byte-level BPE; spm: Llama-style SentencePiece; "
                          "mistral: Mistral 7B's real SentencePiece vocabulary; tekken: Mistral NeMo's real Tekken")
    run.add_argument("--delay", type=float, default=0.0, help="seconds per token, to watch a stream arrive")
    run.add_argument("--reasoning", action=argparse.BooleanOptionalAction, default=True,
                     help="send a chat reply's <think> thought apart from the answer (lab-06; default: on)")
    run.add_argument("--reasoning-field", choices=["reasoning", "reasoning_content"], default="reasoning",
                     help="the thought's name in deltas and messages (reasoning_content: DeepSeek-style clients)")
    run.add_argument("--tokens-per-step", type=int, default=1, metavar="K",
                     help="token ids per engine step, as a speculative decoder emits them (default: 1)")
    args = parser.parse_args()
    if args.tokens_per_step < 1:
        parser.error("--tokens-per-step must be >= 1")
    print(describe_choice("running"))
    # Imported here, not at the top: the server's spawned processes (decode, compiles) import this module
    # again as their __main__, and must not pay for the web server they never run.
    from mini_vllm.serving import serve

    serve(args.host, args.port, args.tokenizer, args.delay, args.reasoning, args.reasoning_field,
          args.tokens_per_step)


if __name__ == "__main__":
    main()
