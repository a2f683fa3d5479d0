"""When a lab that composes others fails inside one of them: the rule, then the student's own frames.

Lab-02 builds its pipeline from labs 01, 03, 04, 05 and 06. A mistake in how it *calls* them
(a tail that skips the tool parser, a prompt not passed on) often surfaces as an exception
raised deep inside a composed lab: a ``ToolCallParseError`` from lab-01's parser, with a
traceback through ``json.decoder``. That traceback points at code the student did not write
and should not change. :func:`escaped_error` turns it into what the student can act on: the
rule their pipeline broke (one line, first), the exception's own words, where it was raised,
and the frames of *their* code that led there.

Under the sandbox (``LAB_SANDBOX=1``) the student's code runs in a child process: the error
comes back rebuilt, carrying the child's frames as text (``sandbox_traceback``), and those are
the frames shown.
"""

from __future__ import annotations

import re
import sysconfig
import traceback
from pathlib import Path

from mini_vllm.labs import lab_of_path

MAX_MESSAGE = 240  # characters of the exception's own message to show
SANDBOX_FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<name>\S+)\n(?P<code>[^\n]*)')
LIBRARIES = tuple(sysconfig.get_paths()[key] for key in ("stdlib", "purelib", "platlib"))


def _shorten(text: str, limit: int = MAX_MESSAGE) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _whose(filename: str) -> str:
    """``lab-01's solution.py`` for a lab's file, the module path otherwise (``json/decoder.py``)."""
    lab = lab_of_path(filename)
    path = Path(filename)
    return f"{lab}'s {path.name}" if lab else "/".join(path.parts[-2:])


def _frames(error: BaseException) -> tuple[list[traceback.FrameSummary], bool]:
    """The frames to read, and whether they are the sandboxed child's (all of them graded code)."""
    trace = getattr(error, "sandbox_traceback", None)
    if isinstance(trace, str) and trace:
        return [traceback.FrameSummary(m["file"], int(m["line"]), m["name"], line=m["code"].strip())
                for m in SANDBOX_FRAME.finditer(trace)], True
    return traceback.extract_tb(error.__traceback__), False


def escaped_error(error: BaseException, call: str, rule: str, own_file: str | Path | None, lab: str) -> str:
    """The failure message for ``error`` escaping ``call``: ``rule`` first, then the student's frames.

    ``own_file`` is the file under test when it runs in this process (its frames are the
    student's); ``lab`` is the lab under test (``"lab-02"``): frames in other labs' folders are
    summarised by where the error was finally raised, never listed as the student's.
    """
    frames, sandboxed = _frames(error)
    own = Path(own_file).resolve() if own_file and not sandboxed else None

    def is_mine(frame: traceback.FrameSummary) -> bool:
        if own is not None:
            return Path(frame.filename).resolve() == own
        in_a_lab = lab_of_path(frame.filename)
        return sandboxed and in_a_lab in (None, lab) and not frame.filename.startswith(LIBRARIES)

    mine = [f for f in frames if is_mine(f)]
    lines = [f"{call} raised {type(error).__name__}: {rule}",
             f"  the error: {type(error).__name__}: {_shorten(str(error).split(chr(10))[0])}"]
    elsewhere = [f for f in frames if lab_of_path(f.filename) not in (None, lab)
                 and not Path(f.filename).name.startswith("test_")]
    origin = elsewhere[-1] if elsewhere else None
    if origin is not None:
        lines.append(f"  raised in {_whose(origin.filename)}, line {origin.lineno} ({origin.name}), "
                     "called by your code:")
    else:
        lines.append("  your code, as far as the error went (innermost last):")
    if mine:
        lines += [f"    {Path(f.filename).name}:{f.lineno} in {f.name}: {(f.line or '').strip()}" for f in mine]
    else:
        lines.append("    (no line of your file is in the traceback)")
    return "\n".join(lines)
