"""lab-09's masks under lab-08's sampler: how the decode process serves a grammar with a stack.

lab-08's ``StructuredSampler`` owns the choice: free while the model thinks, the best allowed
token after. It reads a byte automaton (``start``, ``step``, ``is_accepting``) and asks
``allowed_at(state)`` for the mask. A grammar with a stack has no finite set of states, so
:class:`MatcherView` shows lab-09's ``ByteMatcher`` as such an automaton: each byte read makes a
new state id (a checkpoint of the matcher), and ``allowed_at`` is the mask there: what the lexer alone
decides from the server's engine (``stack_masks``), and lab-09's matcher and parser past each edge where
a lexeme ends. A mask is kept per reply while the parser stands where it stood (inside a string, the
parser never moves: every token there is a lookup).

State ids never repeat, so whatever a sampler keeps per state grows with the reply. A session
therefore hands the reply to a fresh sampler every :data:`SAMPLER_TOKENS` constrained tokens,
at the state the last one reached: what any sampler keeps stays bounded, and on Tekken its
construction (a few ms) is paid once per that many tokens.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from itertools import count
from typing import Any

import numpy as np

from mini_vllm.labtypes.lab08 import CONSTRAINED, DEAD, ByteAutomaton, Vocabulary
from mini_vllm.labtypes.lab09 import Grammar, Lexeme, Rule

VIEW_MASKS = 4  # masks one reply keeps (each an array of up to 127,807 ids on Tekken: 1 MiB; inside a string, one)
SAMPLER_TOKENS = 16  # constrained tokens one sampler chooses before a fresh one takes over


def rebuild_grammar(data: tuple[Any, ...]) -> Grammar:
    """lab-09's grammar from the compile's plain data: rules, and each lexeme's byte automaton (lifted by lab-08)."""
    from array import array

    start, rules, lexemes = data
    built = []
    for name, regex, first, accepting, rows in lexemes:
        table = []
        for raw in rows:
            row = array("i")
            row.frombytes(raw)
            table.append(row)
        built.append(Lexeme(name, regex, ByteAutomaton(start=first, accepting=accepting, table=table)))  # type: ignore[arg-type]
    return Grammar(start, tuple(Rule(lhs, tuple(rhs)) for lhs, rhs in rules), tuple(built))


class MatcherView:
    """lab-09's ``ByteMatcher`` seen as the byte automaton lab-08's sampler reads.

    A state id stands for a checkpoint of the matcher and the bytes read from the view's start. Going
    back to an earlier state on the current path is the matcher's rollback; to a state on another
    branch (a sampler that tried one token, then another), a replay from the start.
    """

    def __init__(self, matcher: Any, masker: Any) -> None:
        self.matcher = matcher
        self.masker = masker
        self.epoch = 0  # bumped when the parser goes back: a parser checkpoint then may stand for another parse
        self._masks: OrderedDict[tuple[Any, ...], np.ndarray] = OrderedDict()
        self._ids = count(1)
        self.start = 0
        self._at = 0
        self._marks: dict[int, tuple[Any, bytes]] = {0: (matcher.checkpoint(), b"")}
        self.asked = 0  # the last state whose mask was asked for (a constrained sampler's state)

    def step(self, state: int, byte: int) -> int:
        if state == DEAD:
            return DEAD
        self._goto(state)
        if not self.matcher.feed(byte):
            return DEAD
        new = next(self._ids)
        self._marks[new] = (self.matcher.checkpoint(), self._marks[state][1] + bytes([byte]))
        self._at = new
        return new

    def is_accepting(self, state: int) -> bool:
        self._goto(state)
        return bool(self.matcher.can_end())

    def allowed_at(self, state: int) -> np.ndarray:
        self.asked = state
        self._goto(state)
        # The mask depends on the parser and the lexer state only: within one epoch a parser checkpoint names one parse.
        key = (self.epoch, getattr(self.matcher.checkpoint(), "parser", object()),
               tuple(map(tuple, self.matcher.lexer_state)))
        found = self._masks.get(key)
        if found is None:
            found = self._masks[key] = np.asarray(self.masker.mask(self.matcher), dtype=np.int64)  # the engine's, or
            found.flags.writeable = False  # lab-09's SplitMasker's list (in the student's release)
            while len(self._masks) > VIEW_MASKS:
                self._masks.popitem(last=False)
        return found

    def restart(self, state: int, data: bytes) -> None:
        """Start again (state 0, nothing remembered) where ``data`` leads from ``state``."""
        self._goto(state)
        for byte in data:
            if not self.matcher.feed(byte):
                raise RuntimeError(f"the grammar refuses byte {byte} of a token the mask allowed")
        self._marks = {0: (self.matcher.checkpoint(), b"")}
        self.start = self._at = 0

    def _goto(self, state: int) -> None:
        if state == self._at:
            return
        mark, path = self._marks[state]
        if self._marks[self._at][1].startswith(path):  # an earlier state of this path: its checkpoint still holds
            if getattr(mark, "parser", None) != getattr(self._marks[self._at][0], "parser", None):
                self.epoch += 1
            self.matcher.rollback(mark)
        else:  # another branch: back to the start, then its bytes again
            self.epoch += 1
            self.matcher.rollback(self._marks[self.start][0])
            for byte in path:
                if not self.matcher.feed(byte):
                    raise RuntimeError("the matcher refused bytes it took before")
        self._at = state


class StackSession:
    """One reply: lab-09's parser and matcher, a view of them, and lab-08's sampler over the view."""

    def __init__(self, lab08: Any, lab09: Any, grammar: Grammar, masker: Any, vocab: Vocabulary, thinking: bool,
                 implicit_end: bytes | None) -> None:
        self.lab08 = lab08
        self.vocab = vocab
        self.view = MatcherView(lab09.ByteMatcher(grammar, lab09.EarleyParser(grammar)), masker)
        self.sampler = lab08.StructuredSampler(self.view, vocab, self.view.allowed_at, thinking=thinking,
                                               implicit_end=implicit_end)
        self.chosen = 0  # constrained tokens the current sampler chose

    def choose(self, scores: Sequence[float]) -> int:
        constrained = self.sampler.phase == CONSTRAINED
        token = int(self.sampler.choose(scores))
        if not constrained or self.sampler.phase != CONSTRAINED:
            return token  # thinking, or the end: nothing to hand over
        self.chosen += 1
        if self.chosen >= SAMPLER_TOKENS:  # the sampler stood at the state it asked the mask of, and read the token
            self.view.restart(self.view.asked, self.vocab.tokens[token] or b"")
            self.sampler = self.lab08.StructuredSampler(self.view, self.vocab, self.view.allowed_at)
            self.chosen = 0
        return token
