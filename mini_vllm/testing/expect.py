"""Checks for bad input that explain what happened instead of dumping a stray exception."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from mini_vllm.testing.trace import quote


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


def hold_problem(fed: str | bytes, held: str | bytes, must: str | bytes, becomes: str) -> str:
    """Which way a hold-back is wrong, in the lesson's terms: it holds too much, too little, or the wrong part.

    ``must`` is what an oracle says must be held after ``fed`` (the part that could still
    become ``becomes``: "a character", "a stop string", "a tag"); ``held`` is what the code
    under test holds. Saying which way matters: holding too little leaks the start of
    something the user must never see, holding too much only delays text.
    """
    def show(value: str | bytes) -> str:
        return (value.hex(" ") or "nothing") if isinstance(value, bytes) else quote(value)

    after = f"after {'bytes ' if isinstance(fed, bytes) else ''}{show(fed)}"
    if not must:
        return f"{after} nothing can still become {becomes}, yet you hold {show(held)}: show it now"
    if len(held) < len(must):
        return (f"{after}, {show(must)} could still become {becomes}: hold all of it until it is decided; "
                f"you hold only {show(held)}, so part of it may reach the user")
    if len(held) > len(must):
        return (f"{after} only {show(must)} could still become {becomes} (hold the longest such suffix, nothing "
                f"more), yet you hold {show(held)}: show the rest now")
    return f"{after} hold exactly {show(must)}, the part that could still become {becomes}, not {show(held)}"
