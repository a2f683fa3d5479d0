"""Lab 09 starter: constrained decoding with a stack.

Fill in the four tasks below (see README.md, "Your task"). Run the tests with:

    make lab-09
"""

from __future__ import annotations

from typing import Any, Protocol

from mini_vllm.labtypes.lab08 import TokenTrie, Vocabulary
from mini_vllm.labtypes.lab09 import DEAD, Grammar, Lexeme, Mark, Rule, Split

__all__ = [
    "DEAD",
    "ByteMatcher",
    "EarleyParser",
    "Grammar",
    "Lexeme",
    "LexerCache",
    "Mark",
    "Rule",
    "Split",
    "SplitMasker",
    "TokenTrie",
    "TrieMasker",
    "Vocabulary",
]

LexerState = tuple[tuple[int, int], ...]  # the live (lexeme id, automaton state) pairs, sorted


class Parser(Protocol):
    """What the join asks of a parser over lexemes (task 1's EarleyParser, or the tests' own)."""

    def allowed(self) -> frozenset[int]: ...
    def push(self, lexemes: frozenset[int]) -> bool: ...
    def accepts(self) -> bool: ...
    def checkpoint(self) -> int: ...
    def rollback(self, mark: int) -> None: ...


# --------------------------------------------------------------------- task 1: the parser


class EarleyParser:
    """An incremental parser over lexeme ids: push one lexeme at a time, ask what may come next, roll back.

    Lexemes are named by their index in ``grammar.lexemes``. The grammar has no empty rules.
    """

    def __init__(self, grammar: Grammar) -> None:
        raise NotImplementedError("lab-09 task 1: implement EarleyParser — see README, 'Your task'")

    def allowed(self) -> frozenset[int]:
        """The lexemes the parser can take next."""
        raise NotImplementedError("lab-09 task 1: implement EarleyParser.allowed — see README, 'Your task'")

    def push(self, lexemes: frozenset[int]) -> bool:
        """Take one lexeme that is any of ``lexemes`` (they read the same bytes); False, no change, if none fits."""
        raise NotImplementedError("lab-09 task 1: implement EarleyParser.push — see README, 'Your task'")

    def accepts(self) -> bool:
        """The lexemes so far are a whole sentence of the grammar."""
        raise NotImplementedError("lab-09 task 1: implement EarleyParser.accepts — see README, 'Your task'")

    def checkpoint(self) -> int:
        """A mark to come back to (cheap: no copy of the input so far)."""
        raise NotImplementedError("lab-09 task 1: implement EarleyParser.checkpoint — see README, 'Your task'")

    def rollback(self, mark: int) -> None:
        """Back to the state at ``mark``; ValueError for a mark this parser never gave or has dropped."""
        raise NotImplementedError("lab-09 task 1: implement EarleyParser.rollback — see README, 'Your task'")


# --------------------------------------------------------------------- task 2: lexer and parser, byte by byte


class ByteMatcher:
    """A state is (lexer state, parser state); ``lexer_state`` is the sorted live (lexeme id, automaton state) pairs."""

    def __init__(self, grammar: Grammar, parser: Parser) -> None:
        raise NotImplementedError("lab-09 task 2: implement ByteMatcher — see README, 'Your task'")

    def feed(self, byte: int) -> bool:
        """Read one byte; False (and nothing changed) when the output cannot go on with it."""
        raise NotImplementedError("lab-09 task 2: implement ByteMatcher.feed — see README, 'Your task'")

    def can_end(self) -> bool:
        """Whether EOS may come now: the lexeme can end here and the parser then holds a whole sentence."""
        raise NotImplementedError("lab-09 task 2: implement ByteMatcher.can_end — see README, 'Your task'")

    def checkpoint(self) -> Mark:
        raise NotImplementedError("lab-09 task 2: implement ByteMatcher.checkpoint — see README, 'Your task'")

    def rollback(self, mark: Mark) -> None:
        raise NotImplementedError("lab-09 task 2: implement ByteMatcher.rollback — see README, 'Your task'")


# --------------------------------------------------------------------- task 3: the mask by a trie walk


class TrieMasker:
    """The mask at a matcher's state, by a walk over the vocabulary's trie (given: ``trie``, flat in preorder)."""

    def __init__(self, vocab: Vocabulary, trie: TokenTrie) -> None:
        raise NotImplementedError("lab-09 task 3: implement TrieMasker — see README, 'Your task'")

    def mask(self, matcher: Any) -> list[int]:
        """Sorted ids of the tokens the matcher can read, EOS when it can end; the matcher ends as it began."""
        raise NotImplementedError("lab-09 task 3: implement TrieMasker.mask — see README, 'Your task'")


# --------------------------------------------------------------------- task 4: what the lexer alone decides


class LexerCache:
    """For a lexer state: the tokens the lexer alone allows, and those the parser must decide."""

    def __init__(self, grammar: Grammar, vocab: Vocabulary, trie: TokenTrie) -> None:
        raise NotImplementedError("lab-09 task 4: implement LexerCache — see README, 'Your task'")

    def split(self, lexer_state: LexerState) -> Split:
        """Computed the first time a lexer state is asked for, then looked up."""
        raise NotImplementedError("lab-09 task 4: implement LexerCache.split — see README, 'Your task'")


class SplitMasker:
    """The mask from the split: the lexer's allowed tokens as they are, the undecided ones checked by the matcher."""

    def __init__(self, grammar: Grammar, vocab: Vocabulary, trie: TokenTrie) -> None:
        raise NotImplementedError("lab-09 task 4: implement SplitMasker — see README, 'Your task'")

    def mask(self, matcher: Any) -> list[int]:
        raise NotImplementedError("lab-09 task 4: implement SplitMasker.mask — see README, 'Your task'")
