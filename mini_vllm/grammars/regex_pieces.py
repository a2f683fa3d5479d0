"""Pieces of regular expression that know the size of the automaton they make, and integer ranges written exactly.

:mod:`mini_vllm.grammars.schema_regex` writes a schema's regex out of these. Each :class:`Piece` carries the
number of states its automaton may have (a character position is a state), so a schema's size is known while its
regex is written, before any automaton exists. A range of integers (``minimum`` / ``maximum``) becomes an
alternation of digit patterns, one length each, so ``7..123`` is ``[7-9]|[1-9][0-9]{1}|1([0-1][0-9]{1}|2[0-3])``:
exactly those numbers, as JSON writes them (no leading zero, no ``-0``).
"""

from __future__ import annotations

from dataclasses import dataclass

UNSIGNED = "(0|[1-9][0-9]*)"
FRACTION = r"(\.[0-9]+)?"
EXPONENT = "([eE][+-]?[0-9]+)?"
_SPECIAL = set("\\.^$|?*+()[]{}/")


@dataclass(frozen=True)
class Piece:
    """A piece of regular expression and the number of automaton states it may make."""

    regex: str
    size: int


def literal(text: str) -> Piece:
    """``text`` matched exactly (every character escaped where the regex syntax needs it)."""
    out = []
    for c in text:
        if c in _SPECIAL:
            out.append("\\" + c)
        elif c == "\n":  # (JSON text never holds a raw control character; a tool tag's newline does)
            out.append("\\n")
        else:
            out.append(c)
    return Piece("".join(out), len(text))


def seq(*pieces: Piece) -> Piece:
    return Piece("".join(p.regex for p in pieces), sum(p.size for p in pieces))


def alt(pieces: list[Piece]) -> Piece:
    if len(pieces) == 1:
        return pieces[0]
    return Piece("(" + "|".join(p.regex for p in pieces) + ")", sum(p.size for p in pieces))


def number_range(low: int | None, high: int | None) -> Piece:
    """Numbers in ``low..high`` (whole bounds, either may be open) written without an exponent.

    A text ±I.F has the whole part I: I.F lies in [I, I + 1), so a bound b is met by I alone,
    except at I = b, where the fraction must be zero (``b.000`` is b; ``b.5`` is past it).
    """
    zero = Piece(r"(\.0+)?", 3)
    fraction = Piece(FRACTION, 3)
    pieces = []
    if high is None or high >= max(low or 0, 0):  # 0 or more: I.F with I from max(low, 0)
        start = max(low or 0, 0)
        if high is None:
            pieces.append(seq(natural_range(start, None), fraction))
        else:
            if start <= high - 1:
                pieces.append(seq(natural_range(start, high - 1), fraction))
            pieces.append(seq(literal(str(high)), zero))
    if low is None or low < 0:  # below 0: -I.F lies in (-(I + 1), -I]
        start = -high if high is not None and high < 0 else 0
        end = None if low is None else -low
        if end is None:
            pieces.append(seq(Piece("-", 1), natural_range(start, None), fraction))
        elif start <= end:
            if start <= end - 1:
                pieces.append(seq(Piece("-", 1), natural_range(start, end - 1), fraction))
            pieces.append(seq(literal(f"-{end}"), zero))
    return alt(pieces)


def integer_range(low: int | None, high: int | None) -> Piece:
    """Exactly the integers in ``low..high`` (either end may be open), as JSON writes them."""
    pieces = []
    if high is None or high >= 0:  # the non-negative part
        pieces.append(natural_range(max(low, 0) if low is not None else 0, high))
    if low is None or low < 0:  # the negative part: -n for n in max(1, -high)..-low
        bottom = 1 if high is None or high >= 0 else -high
        top = None if low is None else -low
        if top is None or bottom <= top:
            pieces.append(seq(Piece("-", 1), positive_range(bottom, top)))
    return alt(pieces)


def natural_range(low: int, high: int | None) -> Piece:
    if low == 0:
        rest = [positive_range(1, high)] if high is None or high >= 1 else []
        return alt([Piece("0", 1), *rest])
    return positive_range(low, high)


def positive_range(low: int, high: int | None) -> Piece:
    """The integers low..high (1 <= low; high None: no end), without leading zeros."""
    pieces = []
    digits = len(str(low))
    top_digits = len(str(high)) if high is not None else digits
    for size in range(digits, top_digits + 1):
        lo = max(low, 10 ** (size - 1))
        hi = min(high, 10 ** size - 1) if high is not None else 10 ** size - 1
        if lo <= hi:
            pieces.extend(_same_length(str(lo), str(hi)))
    if high is None:
        pieces.append(Piece(f"[1-9][0-9]{{{digits},}}", digits + 1))
    return alt(pieces)


def _same_length(lo: str, hi: str) -> list[Piece]:
    """Decimal strings of the same length from ``lo`` to ``hi``."""
    if not lo:
        return [Piece("", 0)]
    if lo[0] == hi[0]:
        return [seq(Piece(lo[0], 1), alt(_same_length(lo[1:], hi[1:])))]
    rest = len(lo) - 1
    pieces = []
    tail_low, tail_high = "0" * rest, "9" * rest
    if lo[1:] == tail_low:
        start = int(lo[0])
    else:
        pieces.append(seq(Piece(lo[0], 1), alt(_same_length(lo[1:], tail_high))))
        start = int(lo[0]) + 1
    end = int(hi[0]) if hi[1:] == tail_high else int(hi[0]) - 1
    if start <= end:
        digit = str(start) if start == end else f"[{start}-{end}]"
        pieces.append(Piece(digit + (f"[0-9]{{{rest}}}" if rest else ""), 1 + rest))
    if hi[1:] != tail_high:
        pieces.append(seq(Piece(hi[0], 1), alt(_same_length(tail_low, hi[1:]))))
    return pieces
