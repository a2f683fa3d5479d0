"""Which lab a student's file is, by the names it defines: a file of another lab is named, not graded as this one.

Each lab's starter defines its public classes and functions (lab-03: ``utf8_expected_len``,
``StreamingDetokenizer``); the names that belong to one lab only tell the labs apart. A file found
at lab-03's place that defines none of lab-03's names and some of lab-08's is lab-08's file,
uploaded to the wrong assignment or saved in the wrong folder; it scores 0 for lab-03 with a
sentence that says so, instead of one AttributeError per test.

The student's file is read, never run: its syntax tree, within a size bound (a file too large or
that does not parse is left for the grading run to judge).
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

from mini_vllm.labs import LABS_DIR

MAX_READ_BYTES = 2 * 2**20  # a lab's file is tens of KB; a larger one is not judged here (the grading run does)
SHOWN = 3  # names quoted in a sentence


def defined_names(text: str) -> list[str]:
    """The public classes and functions ``text`` defines at its top level, in order ([] if it does not parse)."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    kinds = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    return [node.name for node in tree.body if isinstance(node, kinds) and not node.name.startswith("_")]


@functools.cache
def lab_names() -> dict[str, list[str]]:
    """Per lab (``lab-03``), the names its starter defines that no other lab's starter defines."""
    every = {path.parent.name[:6]: defined_names(path.read_text(encoding="utf-8"))
             for path in sorted(LABS_DIR.glob("lab-*/starter.py"))}
    counts: dict[str, int] = {}
    for names in every.values():
        for name in set(names):
            counts[name] = counts.get(name, 0) + 1
    return {lab: [name for name in names if counts[name] == 1] for lab, names in every.items()}


def _quoted(names: list[str]) -> str:
    shown = ", ".join(f"`{name}`" for name in names[:SHOWN])
    return shown + (", ..." if len(names) > SHOWN else "")


def other_lab(file: Path, lab: str) -> str:
    """Why ``file``, found as ``lab``'s (``lab-03-...``), is another lab's file, in a sentence; "" when it is not.

    It is another lab's when it defines none of ``lab``'s own names and some of one other lab's."""
    try:
        if file.stat().st_size > MAX_READ_BYTES:
            return ""
        text = file.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    defined = set(defined_names(text))
    known = lab_names()
    mine = known.get(lab[:6], [])
    if not defined or not mine or defined & set(mine):
        return ""
    matches = {other: [name for name in names if name in defined] for other, names in known.items() if other != lab[:6]}
    matches = {other: names for other, names in matches.items() if names}
    if not matches:
        return ""
    other, names = max(matches.items(), key=lambda item: len(item[1]))
    return f"this file defines {_quoted(names)} ({other}), not {lab[:6]}'s {_quoted(mine)}"
