"""Lab 09 reference solution: constrained decoding with a stack.

The grammar's leaves are lexemes (regular, read byte by byte by their own automata); the
structure between them is context-free, kept by a parser over lexemes. Task 1 is that parser
(Earley, with checkpoints), task 2 joins it to the lexer at byte level, task 3 turns the join
into a token mask by walking a trie of the vocabulary, and task 4 splits off the tokens the
lexer alone decides, computed once per lexer state.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
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


Item = tuple[int, int, int]  # (rule index, dot position, origin: the set where the rule began)


class _EarleySet:
    """The items after some number of lexemes, indexed by the symbol each one waits for."""

    def __init__(self) -> None:
        self.items: list[Item] = []
        self.waiting: dict[int | str, list[Item]] = {}  # next symbol -> items whose dot is before it


class EarleyParser:
    """Earley's parser over lexeme ids, one set per lexeme pushed; a checkpoint is the number of sets.

    With no empty rules, an item completed in set k began in an earlier set, which is already
    whole: so each set is finished when it is built, rolling back is dropping the sets after the
    mark, and a push costs the size of one set (the open rules around the position: the stack).
    """

    def __init__(self, grammar: Grammar) -> None:
        ids = {lexeme.name: i for i, lexeme in enumerate(grammar.lexemes)}
        self._lhs = [rule.lhs for rule in grammar.rules]
        # A lexeme becomes its id (an int), a nonterminal stays its name: the two never collide.
        self._rhs: list[tuple[int | str, ...]] = [tuple(ids.get(s, s) for s in rule.rhs) for rule in grammar.rules]
        self._by_lhs: dict[str, list[int]] = {}
        for index, lhs in enumerate(self._lhs):
            self._by_lhs.setdefault(lhs, []).append(index)
        self._start = grammar.start
        self._sets: list[_EarleySet] = []
        self._sets.append(self._close([(r, 0, 0) for r in self._by_lhs.get(grammar.start, [])]))

    def _close(self, seeds: list[Item]) -> _EarleySet:
        """The set holding ``seeds`` and everything they predict and complete."""
        here = len(self._sets)
        earley_set, seen, agenda = _EarleySet(), set(), list(seeds)
        while agenda:
            item = agenda.pop()
            if item in seen:
                continue
            seen.add(item)
            earley_set.items.append(item)
            rule, dot, origin = item
            rhs = self._rhs[rule]
            if dot == len(rhs):  # complete: every item that waited for this nonterminal where it began moves on
                for rule2, dot2, origin2 in self._sets[origin].waiting.get(self._lhs[rule], ()):
                    agenda.append((rule2, dot2 + 1, origin2))
                continue
            symbol = rhs[dot]
            earley_set.waiting.setdefault(symbol, []).append(item)
            if isinstance(symbol, str):  # predict: the nonterminal's rules start here
                agenda.extend((r, 0, here) for r in self._by_lhs.get(symbol, ()))
        return earley_set

    def allowed(self) -> frozenset[int]:
        """The lexemes some item of the last set waits for."""
        return frozenset(s for s in self._sets[-1].waiting if isinstance(s, int))

    def push(self, lexemes: frozenset[int]) -> bool:
        """Take one lexeme that is any of ``lexemes`` (they read the same bytes); False, no change, if none fits."""
        last = self._sets[-1]
        seeds = [(rule, dot + 1, origin) for lexeme in lexemes for rule, dot, origin in last.waiting.get(lexeme, ())]
        if not seeds:
            return False
        self._sets.append(self._close(seeds))
        return True

    def accepts(self) -> bool:
        """The lexemes so far are a whole sentence: a start rule complete, begun at the very beginning."""
        return any(dot == len(self._rhs[rule]) and origin == 0 and self._lhs[rule] == self._start
                   for rule, dot, origin in self._sets[-1].items)

    def checkpoint(self) -> int:
        return len(self._sets)

    def rollback(self, mark: int) -> None:
        if not 1 <= mark <= len(self._sets):
            raise ValueError(f"no checkpoint {mark}: the parser holds {len(self._sets)} sets")
        del self._sets[mark:]


# --------------------------------------------------------------------- task 2: lexer and parser, byte by byte


class ByteMatcher:
    """A state is (lexer state, parser state): which lexemes are still alive where, and the parser.

    Rules (the README's): a lexeme starts as every lexeme the parser allows next; a byte that some
    live lexeme can read extends the lexeme (longest match); otherwise the lexeme ends there, if one
    of the live lexemes is complete, and the parser takes all the complete ones as one lexeme, and the
    byte starts the next lexeme. The parser is asked only when a lexeme ends.
    """

    def __init__(self, grammar: Grammar, parser: Parser) -> None:
        self.grammar = grammar
        self.parser = parser
        self._automata = [lexeme.automaton for lexeme in grammar.lexemes]
        self._parser_mark = parser.checkpoint()  # known here, so a checkpoint of the matcher asks the parser nothing
        # Bytes no lexeme can start with: a lexeme never ends before one of them, so the parser need not be asked.
        self._starters = frozenset(b for b in range(256) if any(a.step(a.start, b) != DEAD for a in self._automata))
        self.lexer_state: LexerState = self._fresh()

    def _fresh(self) -> LexerState:
        """A new lexeme: every lexeme the parser can take next, at its automaton's start."""
        return tuple(sorted((x, self._automata[x].start) for x in self.parser.allowed()))

    def _extend(self, state: LexerState, byte: int) -> LexerState:
        moved = ((x, self._automata[x].step(s, byte)) for x, s in state)
        return tuple((x, t) for x, t in moved if t != DEAD)

    def _complete(self, state: LexerState) -> frozenset[int]:
        return frozenset(x for x, s in state if self._automata[x].is_accepting(s))

    def feed(self, byte: int) -> bool:
        """Read one byte; False (and nothing changed) when no lexeme can read it and none can end before it."""
        extended = self._extend(self.lexer_state, byte)
        if extended:  # longest match: a lexeme that can go on, goes on
            self.lexer_state = extended
            return True
        if byte not in self._starters:
            return False
        complete = self._complete(self.lexer_state)
        if not complete or not self.parser.push(complete):
            return False
        started = self._extend(self._fresh(), byte)
        if not started:  # the byte starts nothing the parser allows after that lexeme: undo the push
            self.parser.rollback(self._parser_mark)
            return False
        self._parser_mark = self.parser.checkpoint()
        self.lexer_state = started
        return True

    def can_end(self) -> bool:
        """EOS: the current lexeme can end here and, with it, the parser holds a whole sentence."""
        complete = self._complete(self.lexer_state)
        if not complete or not self.parser.push(complete):
            return False
        whole = self.parser.accepts()
        self.parser.rollback(self._parser_mark)
        return whole

    def checkpoint(self) -> Mark:
        return Mark(self.lexer_state, self._parser_mark)

    def rollback(self, mark: Mark) -> None:
        if mark.parser != self._parser_mark:  # inside one lexeme the parser never moved: nothing to ask it
            self.parser.rollback(mark.parser)
            self._parser_mark = mark.parser
        self.lexer_state = mark.lexer


# --------------------------------------------------------------------- task 3: the mask by a trie walk


class TrieMasker:
    """The mask at a matcher's state: every token whose bytes it can read, EOS when it can end."""

    def __init__(self, vocab: Vocabulary, trie: TokenTrie) -> None:
        self.vocab = vocab
        self.trie = trie  # the vocabulary's, given: built once and shared by every grammar

    def mask(self, matcher: Any) -> list[int]:
        """A trie walk from the matcher's state: a refused byte skips its subtree; the matcher ends as it began."""
        allowed: list[int] = []
        _walk(self.trie, matcher, 0, allowed)
        if matcher.can_end():
            allowed.append(self.vocab.eos_token_id)
        return sorted(allowed)


def _walk(trie: TokenTrie, matcher: Any, node: int, allowed: list[int]) -> None:
    """Add every token under ``node`` whose remaining bytes the matcher takes; leave the matcher as it was."""
    mark = matcher.checkpoint()
    byte, skip, ending = trie.byte, trie.skip, trie.ending
    child, end = node + 1, skip[node]
    while child < end:  # the children in byte order: each next one lies past the previous one's subtree
        if matcher.feed(byte[child]):  # else pruned: no token under this prefix (and a refused feed changed nothing)
            allowed.extend(ending[child])
            if skip[child] > child + 1:
                _walk(trie, matcher, child, allowed)
            matcher.rollback(mark)  # back to this node's state before the next byte
        child = skip[child]


# --------------------------------------------------------------------- task 4: what the lexer alone decides


# Where a lexeme ends under a trie node: the bytes from that node to a node inside the lexeme (the lexer alone takes
# them), then the edges out of it whose byte ends the lexeme, each (byte, child): the parser decides those.
Boundary = list[tuple[bytes, list[tuple[int, int]]]]


class LexerCache:
    """For a lexer state, the tokens the lexer alone allows and those the parser must decide; each state once.

    The same question is asked below a trie node too: once a token's bytes end one lexeme and start the
    next, the rest of the token is the new lexeme's, and what its lexer state decides under that node is
    as cacheable as what it decides from the root (keyed by both).
    """

    def __init__(self, grammar: Grammar, vocab: Vocabulary, trie: TokenTrie) -> None:
        self.grammar = grammar
        self.vocab = vocab
        self._automata = [lexeme.automaton for lexeme in grammar.lexemes]
        self.trie = trie  # the vocabulary's, given: a new grammar costs its own size, not the vocabulary's
        self._splits: dict[tuple[LexerState, int], tuple[Split, Boundary]] = {}

    def split(self, lexer_state: LexerState) -> Split:
        return self._entry(lexer_state, 0)[0]

    def _entry(self, lexer_state: LexerState, root: int) -> tuple[Split, Boundary]:
        """The split of the tokens under trie node ``root`` read from ``lexer_state``, and where under ``root`` a
        lexeme ends (the undecided tokens are the tokens past those edges)."""
        key = (lexer_state, root)
        found = self._splits.get(key)
        if found is None:  # keyed by the whole lexer state: which lexemes, and where each one stands
            found = self._splits[key] = self._compute(lexer_state, root)
        return found

    def _compute(self, lexer_state: LexerState, root: int) -> tuple[Split, Boundary]:
        trie, automata = self.trie, self._automata
        bytes_of, skip, ending = trie.byte, trie.skip, trie.ending
        allowed: list[int] = []
        undecided: list[int] = []
        boundary: Boundary = []
        stack: list[tuple[int, LexerState]] = [(root, lexer_state)]
        while stack:
            node, here = stack.pop()
            complete: bool | None = None
            ends_here: list[tuple[int, int]] = []
            child, end = node + 1, skip[node]
            while child < end:  # the children in byte order
                byte, after = bytes_of[child], skip[child]
                there = tuple((x, t) for x, s in here if (t := automata[x].step(s, byte)) != DEAD)
                if there:  # the byte goes on inside the lexeme: no parser needed
                    allowed.extend(ending[child])
                    if after > child + 1:
                        stack.append((child, there))
                elif complete is None or complete:
                    if complete is None:
                        complete = any(automata[x].is_accepting(s) for x, s in here)
                    if complete:  # the lexeme would end before this byte: what follows is the parser's to judge
                        undecided.extend(trie.tokens_below(child))
                        ends_here.append((byte, child))
                child = after
            if ends_here:
                boundary.append((trie.path(node, above=root), ends_here))
        return Split(_laid_out(sorted(allowed)), tuple(sorted(undecided))), boundary


class SplitMasker:
    """The mask from the split: the lexer's allowed tokens as they are; where a lexeme ends the parser takes the
    byte, and below it the next lexeme's split (cached in turn, under that trie node) decides the rest."""

    def __init__(self, grammar: Grammar, vocab: Vocabulary, trie: TokenTrie) -> None:
        self.vocab = vocab
        self.cache = LexerCache(grammar, vocab, trie)

    def mask(self, matcher: Any) -> list[int]:
        split, boundary = self.cache._entry(tuple(matcher.lexer_state), 0)
        checked: list[int] = []
        self._add_past(matcher, boundary, checked)
        if matcher.can_end():
            checked.append(self.vocab.eos_token_id)
        return _merged(split.allowed, checked)

    def _add_past(self, matcher: Any, boundary: Boundary, checked: list[int]) -> None:
        """Add every token past ``boundary`` that the matcher reads to its last byte; leave the matcher as it was."""
        ending, skip = self.cache.trie.ending, self.cache.trie.skip
        mark = matcher.checkpoint()
        for inside, edges in boundary:
            if all(matcher.feed(byte) for byte in inside):  # still inside the lexeme: the lexer alone takes these
                before = matcher.checkpoint()
                for byte, node in edges:
                    if not matcher.feed(byte):  # the parser refused the lexeme's end here (and nothing changed)
                        continue
                    checked.extend(ending[node])
                    if skip[node] > node + 1:  # the rest of these tokens: the new lexeme's split under this node
                        split, below = self.cache._entry(tuple(matcher.lexer_state), node)
                        checked.extend(split.allowed)
                        self._add_past(matcher, below, checked)
                    matcher.rollback(before)
            matcher.rollback(mark)


def _laid_out(tokens: list[int]) -> tuple[int, ...]:
    """``tokens`` as new int objects, side by side in memory in the order given.

    Every mask copies its split's allowed tokens, touching each int object to count a reference. The trie's
    own ints lie wherever the trie build left them, and 127,785 of them (inside a Tekken string) took 2 ms to
    copy in cache misses; laid out in order, 0.2 ms.
    """
    return tuple(array("q", tokens).tolist())


def _merged(allowed: tuple[int, ...], checked: list[int]) -> list[int]:
    """``sorted(allowed + checked)`` for a sorted ``allowed``: the few checked tokens go in by bisection, so the
    many allowed ones (127,785 inside a Tekken string) are copied, never compared again."""
    checked.sort()
    merged: list[int] = []
    start = 0
    for token in checked:
        at = bisect_left(allowed, token, start)
        merged.extend(allowed[start:at])
        merged.append(token)
        start = at
    merged.extend(allowed[start:])
    return merged
