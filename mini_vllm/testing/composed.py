"""When a lab that composes others fails inside one of them: the rule, then the student's own frames.

Lab-02 builds its pipeline from labs 01, 03, 04, 05 and 06. A mistake in how it *calls* them
(a tail that skips the tool parser, a prompt not passed on) often surfaces as an exception
raised deep inside a composed lab: a ``ToolCallParseError`` from lab-01's parser, with a
traceback through ``json.decoder``. That traceback points at code the student did not write
and should not change. :func:`escaped_error` turns it into what the student can act on: the
rule their pipeline broke (one line, first), the exception's own words, where it was raised,
and the frames of *their* file that led there.
"""

from __future__ import annotations

import traceback
from pathlib import Path

from mini_vllm.labs import lab_of_path

MAX_MESSAGE = 240  # characters of the exception's own message to show


def _shorten(text: str, limit: int = MAX_MESSAGE) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _whose(filename: str) -> str:
    """``lab-01's solution.py`` for a lab's file, the module path otherwise (``json/decoder.py``)."""
    lab = lab_of_path(filename)
    path = Path(filename)
    return f"{lab}'s {path.name}" if lab else "/".join(path.parts[-2:])


def escaped_error(error: BaseException, call: str, rule: str, own_file: str | Path | None) -> str:
    """The failure message for ``error`` escaping ``call``: ``rule`` first, then the student's frames.

    ``own_file`` is the file under test (its frames are the student's); frames elsewhere are
    summarised by where the error was finally raised.
    """
    frames = traceback.extract_tb(error.__traceback__)
    own = Path(own_file).resolve() if own_file else None
    mine = [f for f in frames if own is not None and Path(f.filename).resolve() == own]
    lines = [f"{call} raised {type(error).__name__}: {rule}",
             f"  the error: {type(error).__name__}: {_shorten(str(error))}"]
    outside = [f for f in frames if f not in mine and lab_of_path(f.filename)]
    if outside:
        origin = outside[-1]
        lines.append(f"  raised in {_whose(origin.filename)}, line {origin.lineno} ({origin.name}), "
                     "called by your code:")
    if mine:
        lines += [f"    {Path(f.filename).name}:{f.lineno} in {f.name}: {(f.line or '').strip()}" for f in mine]
    else:
        lines.append("    (no line of your file is in the traceback)")
    return "\n".join(lines)
