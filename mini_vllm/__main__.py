"""``python -m mini_vllm serve [--port N] [--tokenizer byte|bpe] [--delay SECONDS] [--tokens-per-step K]``."""

from __future__ import annotations

import argparse

from mini_vllm.labs import describe_choice
from mini_vllm.serving import serve


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m mini_vllm", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("serve", help="the OpenAI-compatible server, with the pipeline LAB_IMPL selects")
    run.add_argument("--host", default="127.0.0.1", help="interface to bind (default: 127.0.0.1, this machine only)")
    run.add_argument("--port", type=int, default=8000)
    run.add_argument("--tokenizer", choices=["byte", "bpe"], default="bpe")
    run.add_argument("--delay", type=float, default=0.0, help="seconds per token, to watch a stream arrive")
    run.add_argument("--tokens-per-step", type=int, default=1, metavar="K",
                     help="token ids per engine step, as a speculative decoder emits them (default: 1)")
    args = parser.parse_args()
    if args.tokens_per_step < 1:
        parser.error("--tokens-per-step must be >= 1")
    print(describe_choice())
    serve(args.host, args.port, args.tokenizer, args.delay, args.tokens_per_step)


if __name__ == "__main__":
    main()
