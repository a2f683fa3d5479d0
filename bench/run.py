"""`make bench`: every lab's benchmark in one run, then the headline ratios."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # so `bench.*` imports work as a script

from bench import bench_lab03
from mini_vllm.labs import describe_choice

BENCHMARKS = [bench_lab03]

if __name__ == "__main__":
    print(describe_choice())
    headlines = [line for bench in BENCHMARKS for line in bench.main()]
    print("\nHeadlines:\n  " + "\n  ".join(headlines))
