"""lab-09's value types: a grammar over lexemes, a matcher's checkpoint, and the lexer's split of a vocabulary.

A :class:`Grammar` is plain data: rules over symbol names, and the lexemes (terminals), each
with its regular expression and its byte automaton (lab-08's :class:`ByteAutomaton`). It
crosses into the lab's code once, as a value.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mini_vllm.labtypes.lab08 import DEAD, ByteAutomaton

__all__ = ["DEAD", "ByteAutomaton", "Grammar", "Lexeme", "Mark", "Rule", "Split"]


@dataclass(frozen=True)
class Lexeme:
    """A terminal of the grammar: a regular language over bytes, read by its own automaton.

    ``automaton`` reads exactly the UTF-8 encodings of the strings ``regex`` matches (lab-08's
    lifting). No lexeme matches the empty string. Read the automaton only through ``step``,
    ``is_accepting`` and ``start``: the tests may hand you one that counts its steps.
    """

    name: str  # upper case, e.g. "LBRACE", "STRING_3"
    regex: str
    automaton: Any  # a ByteAutomaton (or, in the tests, one that counts the steps asked of it)


@dataclass(frozen=True)
class Rule:
    """``lhs -> rhs[0] rhs[1] ...``; each symbol is a nonterminal (lower case) or a lexeme's name (upper case).

    A right-hand side is never empty: the grammars of this lab have no empty rules.
    """

    lhs: str
    rhs: tuple[str, ...]


@dataclass(frozen=True)
class Grammar:
    """A context-free grammar whose terminals are lexemes; a sentence is what ``start`` derives."""

    start: str
    rules: tuple[Rule, ...]
    lexemes: tuple[Lexeme, ...]

    def lexeme_id(self, name: str) -> int:
        """The index of the lexeme called ``name`` (a parser speaks of lexemes by index)."""
        for index, lexeme in enumerate(self.lexemes):
            if lexeme.name == name:
                return index
        raise KeyError(name)

    def is_lexeme(self, symbol: str) -> bool:
        return symbol[:1].isupper()


@dataclass(frozen=True)
class Mark:
    """A ByteMatcher's checkpoint: where the lexer stood, and the parser's own checkpoint."""

    lexer: tuple[tuple[int, int], ...]
    parser: int


@dataclass(frozen=True)
class Split:
    """What the lexer alone says about every token from one lexer state (task 4).

    ``allowed``: tokens whose every byte continues the current lexeme (no parser needed);
    ``undecided``: tokens that end the lexeme inside them, so the parser must be asked. Every
    other ordinary token is refused by the lexer alone.
    """

    allowed: tuple[int, ...]
    undecided: tuple[int, ...]
