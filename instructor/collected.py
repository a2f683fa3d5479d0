"""A pytest plugin that says when collection is over and waits to be let go: ``-p instructor.collected``.

With ``COLLECTED_SIGNAL`` set to a path, the run writes it once its tests are collected, then waits
until ``<path>.go`` exists before running them. ``tests/test_budgets_under_load.py`` starts its CPU
burners between the two: what it compares is how the graded calls and the sandbox fare under load,
and collecting every lab's tests (half a grading's CPU) is the same work whatever the load.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

SIGNAL_ENV = "COLLECTED_SIGNAL"
WAIT_S = 600


def pytest_collection_finish(session: pytest.Session) -> None:
    signal = os.environ.get(SIGNAL_ENV)
    if not signal:
        return
    Path(signal).write_text(str(len(session.items)), encoding="utf-8")
    go, deadline = Path(signal + ".go"), time.monotonic() + WAIT_S
    while not go.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
