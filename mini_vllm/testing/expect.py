"""Checks for bad input that explain what happened instead of dumping a stray exception."""

from __future__ import annotations

from collections.abc import Callable

import pytest


def must_raise(call: Callable[[], object], error: type[Exception], what: str) -> Exception:
    """Run ``call``, which must raise ``error``; return the exception for further checks.

    Any other outcome fails with a sentence a student can act on, naming ``what`` was
    called. A different exception usually means the code touched the input (hashed it,
    concatenated it, looked it up) before checking it.
    """
    try:
        call()
    except error as raised:
        return raised
    except Exception as other:
        pytest.fail(f"{what} should raise {error.__name__}, but it raised {type(other).__name__}: {other} "
                    "(did the code use the input before checking it?)")
    pytest.fail(f"{what} was accepted: it should raise {error.__name__}")
