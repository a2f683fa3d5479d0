"""`make bench`: every lab's benchmark in one run, then the headline ratios.

Run from the repository root (the Makefile does): ``make bench``.
"""

from __future__ import annotations

from bench import (
    bench_lab01,
    bench_lab02,
    bench_lab03,
    bench_lab04,
    bench_lab05,
    bench_lab06,
    bench_lab08,
    bench_real_vocab,
    bench_server,
)
from mini_vllm.labs import describe_choice

BENCHMARKS = [bench_lab03, bench_lab04, bench_real_vocab, bench_lab05, bench_lab06, bench_lab01, bench_lab02,
              bench_server, bench_lab08]

if __name__ == "__main__":
    print(describe_choice("running"))
    headlines = [line for bench in BENCHMARKS for line in bench.main()]
    print("\nHeadlines:\n  " + "\n  ".join(headlines))
