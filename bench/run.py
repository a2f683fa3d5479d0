"""`make bench`: every lab's benchmark in one run, then the headline ratios.

Run from the repository root (the Makefile does): ``make bench``, or some of them by name:
``make bench ARGS="lab09"`` (names: the modules' suffixes, e.g. ``lab08``, ``server``, ``real_vocab``).
"""

from __future__ import annotations

import sys

from bench import (
    bench_lab01,
    bench_lab02,
    bench_lab03,
    bench_lab04,
    bench_lab05,
    bench_lab06,
    bench_lab07,
    bench_lab08,
    bench_lab09,
    bench_real_vocab,
    bench_server,
    bench_structured,
)
from mini_vllm.labs import describe_choice

BENCHMARKS = [bench_lab03, bench_lab04, bench_real_vocab, bench_lab05, bench_lab06, bench_lab01, bench_lab02,
              bench_lab07, bench_server, bench_lab08, bench_lab09, bench_structured]
BY_NAME = {bench.__name__.removeprefix("bench.bench_"): bench for bench in BENCHMARKS}

if __name__ == "__main__":
    unknown = [name for name in sys.argv[1:] if name not in BY_NAME]
    if unknown:
        sys.exit(f"no benchmark called {', '.join(unknown)}: choose from {', '.join(BY_NAME)}")
    chosen = [BY_NAME[name] for name in sys.argv[1:]] or BENCHMARKS
    print(describe_choice("running"))
    headlines = [line for bench in chosen for line in bench.main()]
    print("\nHeadlines:\n  " + "\n  ".join(headlines))
