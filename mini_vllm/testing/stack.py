"""lab-09's oracles and trusted helpers: libraries, definitions and counters, never a second solution.

- :class:`LarkParser` is lark's LALR(1) parser driven lexeme by lexeme (its interactive mode),
  behind the same five methods the lab's parser has. It is what tasks 2-4 run on, so a bug in
  task 1 costs points in task 1 only, and it counts what is asked of it where code under test
  cannot reach the count. LALR(1) is its restriction: the grammars it runs on are those lark
  builds a table for without a conflict. An ``anyOf`` whose branches can read the same text is
  not one of them, and every test of task 1 has such a grammar, so this parser answers none.
- :func:`lexemes_after` is task 1's oracle step by step, a whole-prefix formulation: llguidance's
  Earley parser over the same rules with every lexeme spelled as one character, fed the whole
  sequence of lexemes so far each time it is asked (any grammar, ambiguous ones included).
- :func:`earley_accepts` is lark's Earley parser over the whole text (lexemes by their regexes).
- :class:`GuidanceGrammarOracle` is llguidance's matcher on the same grammar, in lark's syntax.
- :func:`split_after` is task 4's oracle: llguidance's lexer over "one of these lexemes, then the end",
  asked of the bytes read since the lexeme began (a split keyed by those bytes, which ``LexerCache`` never has).
- :func:`counting_grammar` hands the lab a grammar whose lexeme automata count their steps.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from typing import Any

from mini_vllm.grammars.stack_grammar import grammar_to_lark
from mini_vllm.labtypes.lab08 import DEAD, Vocabulary
from mini_vllm.labtypes.lab09 import Grammar, Lexeme, Rule, Split
from mini_vllm.testing.structured import CountingAutomaton, _guidance_tokenizer, _GuidanceTokenizer, allowed_ids


@functools.cache
def _lalr(text: str) -> Any:
    from lark import Lark

    return Lark(text, parser="lalr", lexer="basic")


@functools.cache
def _earley(text: str) -> Any:
    from lark import Lark

    return Lark(text, parser="earley", lexer="dynamic")


class LarkParser:
    """lark's LALR(1) parser fed lexemes by hand: ``allowed``, ``push``, ``accepts``, ``checkpoint``, ``rollback``.

    A push of several lexemes (they matched the same bytes) keeps one lark parser per lexeme
    that fits, so the parser state is a small set of lark states; a checkpoint is the length of
    the history of those sets, and a rollback drops what came after it.
    """

    def __init__(self, grammar: Grammar) -> None:
        self._lark = _lalr(grammar_to_lark(grammar, regexes=False))
        self._names = [lexeme.name for lexeme in grammar.lexemes]
        self._ids = {name: i for i, name in enumerate(self._names)}
        self._history: list[list[Any]] = [[self._lark.parse_interactive("")]]
        self._accepts: dict[tuple[int, ...], frozenset[str]] = {}
        self.pushes = 0  # push calls (the work a mask asks of the parser)
        self.calls = 0  # every call, of any method

    def _terminals(self, parser: Any) -> frozenset[str]:
        key = tuple(parser.parser_state.state_stack)
        if key not in self._accepts:
            self._accepts[key] = frozenset(parser.accepts())
        return self._accepts[key]

    def allowed(self) -> frozenset[int]:
        self.calls += 1
        return frozenset(self._ids[t] for p in self._history[-1] for t in self._terminals(p) if t in self._ids)

    def push(self, lexemes: frozenset[int]) -> bool:
        from lark import Token

        self.calls += 1
        self.pushes += 1
        names = {self._names[x] for x in lexemes if isinstance(x, int) and 0 <= x < len(self._names)}
        after, seen = [], set()
        for parser in self._history[-1]:
            for name in sorted(names & self._terminals(parser)):
                moved = parser.copy(deepcopy_values=False)
                moved.feed_token(Token(name, ""))
                key = tuple(moved.parser_state.state_stack)
                if key not in seen:
                    seen.add(key)
                    after.append(moved)
        if not after:
            return False
        self._history.append(after)
        return True

    def accepts(self) -> bool:
        self.calls += 1
        return any("$END" in self._terminals(p) for p in self._history[-1])

    def checkpoint(self) -> int:
        self.calls += 1
        return len(self._history)

    def rollback(self, mark: int) -> None:
        self.calls += 1
        if not isinstance(mark, int) or not 1 <= mark <= len(self._history):
            raise ValueError(f"no checkpoint {mark!r}: the parser holds {len(self._history)} states")
        del self._history[mark:]


# The characters that spell the lexemes for lexemes_after: printable ASCII but the quote and the backslash.
_LEXEME_CHARS = [c for c in range(0x21, 0x7F) if chr(c) not in '"\\']


@functools.cache
def _lexeme_matcher(rules_text: str, count: int) -> Any:
    import llguidance

    vocab = Vocabulary(tokens=[bytes([_LEXEME_CHARS[i]]) for i in range(count)] + [None], eos_token_id=count)
    tokenizer = llguidance.LLTokenizer(llguidance.TokenizerWrapper(_GuidanceTokenizer(vocab)), n_vocab=count + 1)
    matcher = llguidance.LLMatcher(tokenizer, rules_text, log_level=0)
    if matcher.is_error():
        raise ValueError(f"llguidance refused the grammar: {matcher.get_error()}")
    return matcher


def lexemes_after(grammar: Grammar, pushed: Sequence[int]) -> tuple[frozenset[int], bool] | None:
    """After the whole sequence ``pushed`` of lexeme ids: the lexemes some sentence continues it with, and whether
    it is a sentence itself; None when no sentence starts with it. Asked afresh each time (llguidance's Earley
    parser over the grammar's rules, each lexeme one character): the definition, not an incremental parser."""
    count = len(grammar.lexemes)
    if count > len(_LEXEME_CHARS):
        raise ValueError(f"{count} lexemes: more than this oracle spells ({len(_LEXEME_CHARS)})")
    lines = grammar_to_lark(grammar, regexes=False, llguidance=True).splitlines()
    lines = [line for line in lines if not line.startswith("%declare")]
    lines += [f'{lexeme.name}: "{chr(_LEXEME_CHARS[i])}"' for i, lexeme in enumerate(grammar.lexemes)]
    matcher = _lexeme_matcher("\n".join(lines) + "\n", count)
    matcher.reset()
    for lexeme in pushed:
        # try_consume_tokens refuses without putting the shared matcher into its error state (which reset() keeps)
        if not 0 <= lexeme < count or matcher.try_consume_tokens([lexeme]) != 1:
            return None
    bits = matcher.compute_bitmask()
    return frozenset(allowed_ids(bits, count)), bool(bits[count >> 3] >> (count & 7) & 1)


def earley_accepts(grammar: Grammar, text: str) -> bool:
    """Whether lark's Earley parser reads ``text`` as a sentence of ``grammar`` (any split into lexemes)."""
    from lark.exceptions import LarkError

    try:
        _earley(grammar_to_lark(grammar)).parse(text)
    except LarkError:
        return False
    return True


def lex_compact(grammar: Grammar, text: str) -> list[frozenset[int]] | None:
    """``text`` cut into lexemes by longest match over every lexeme (right for JSON, whose lexemes delimit
    themselves): each piece is the set of lexemes matching it. None when some position starts no lexeme."""
    patterns = [re.compile(lexeme.regex) for lexeme in grammar.lexemes]
    pieces, at = [], 0
    while at < len(text):
        lengths = [(m.end() - at) if (m := p.match(text, at)) else 0 for p in patterns]
        best = max(lengths)
        if best == 0:
            return None
        pieces.append(frozenset(i for i, n in enumerate(lengths) if n == best))
        at += best
    return pieces


class GuidanceGrammarOracle:
    """llguidance's matcher for the grammar (forcing off: every tokenization allowed), one token at a time."""

    def __init__(self, grammar: Grammar, vocab: Vocabulary) -> None:
        import llguidance

        tokenizer = _guidance_tokenizer(vocab)  # made once per vocabulary
        self.matcher = llguidance.LLMatcher(tokenizer, grammar_to_lark(grammar, llguidance=True), log_level=0)
        if self.matcher.is_error():
            raise ValueError(f"llguidance refused the grammar: {self.matcher.get_error()}")
        self.size = len(vocab)

    def mask(self) -> list[int]:
        return allowed_ids(self.matcher.compute_bitmask(), self.size)

    def consume(self, token_id: int) -> None:
        if not self.matcher.consume_token(token_id):
            raise ValueError(f"llguidance refused token {token_id}: {self.matcher.get_error()}")


def counting_grammar(grammar: Grammar) -> tuple[Grammar, list[CountingAutomaton]]:
    """The same grammar with lexeme automata that count their steps (on the tests' side of the sandbox)."""
    counters = [CountingAutomaton(lexeme.automaton) for lexeme in grammar.lexemes]
    lexemes = tuple(Lexeme(lexeme.name, lexeme.regex, counter) for lexeme, counter in zip(grammar.lexemes, counters,
                                                                                          strict=True))
    return Grammar(grammar.start, grammar.rules, lexemes), counters


def lexer_state_after(grammar: Grammar, lexemes: frozenset[int], data: bytes) -> tuple[tuple[int, int], ...]:
    """The lexer state (live (lexeme, automaton state) pairs, sorted) after reading ``data`` from a lexeme's start
    where the parser allows ``lexemes``: the definition, used to build lexer states without a matcher."""
    state = []
    for x in sorted(lexemes):
        automaton = grammar.lexemes[x].automaton
        here = automaton.start
        for byte in data:
            here = automaton.step(here, byte)
            if here == DEAD:
                break
        if here != DEAD:
            state.append((x, here))
    return tuple(state)


def split_after(grammar: Grammar, vocab: Vocabulary, lexemes: frozenset[int], data: bytes) -> Split:
    """Task 4's split where a lexeme began as any of ``lexemes`` and has read ``data``, from llguidance's lexer.

    llguidance reads a grammar whose sentences are one of those lexemes and nothing after it, one byte a token
    (its lexer is greedy, as rule 2 says). After ``data``, each token's bytes are fed while llguidance takes
    them: all taken, the lexer alone allows it; stopped where llguidance would end the sentence (EOS allowed: a
    live lexeme is complete), it is undecided (the parser decides the rest); stopped elsewhere, refused. Asked
    of the bytes read since the lexeme began, not of a lexer state: no answer to ``LexerCache.split``.
    """
    names = sorted(grammar.lexemes[x].name for x in lexemes)
    one = Grammar("start", tuple(Rule("start", (name,)) for name in names), grammar.lexemes)
    matcher = _one_lexeme_matcher(grammar_to_lark(one, llguidance=True))
    matcher.reset()
    if matcher.try_consume_tokens(list(data)) != len(data):
        raise ValueError(f"no lexeme of {sorted(lexemes)} reads {data!r}")
    allowed, undecided = [], []
    for token_id, token in enumerate(vocab.tokens):
        if not token:
            continue
        taken = matcher.try_consume_tokens(list(token))
        complete_there = taken < len(token) and matcher.is_accepting()
        if taken:
            matcher.rollback(taken)
        if taken == len(token):
            allowed.append(token_id)
        elif complete_there:
            undecided.append(token_id)
    return Split(tuple(allowed), tuple(undecided))


@functools.cache
def _one_lexeme_matcher(rules_text: str) -> Any:
    """llguidance's matcher, one byte a token, for a grammar in lark's syntax ("one of these lexemes, then the end")."""
    import llguidance

    vocab = Vocabulary(tokens=[bytes([b]) for b in range(256)] + [None], eos_token_id=256)
    tokenizer = llguidance.LLTokenizer(llguidance.TokenizerWrapper(_GuidanceTokenizer(vocab)), n_vocab=257)
    matcher = llguidance.LLMatcher(tokenizer, rules_text, log_level=0)
    if matcher.is_error():
        raise ValueError(f"llguidance refused the grammar: {matcher.get_error()}")
    return matcher
