"""Wrong on purpose: the first lexeme starts only when the first byte comes, so ``lexer_state`` is empty before it.

Rule 1 starts a lexeme as soon as the parser allows one: before any byte the lexer state is
every lexeme the parser allows first, each at its automaton's start.
"""

from mini_vllm.labs import load_lab

_solution = load_lab("lab-09", "solution")
globals().update({name: getattr(_solution, name) for name in _solution.__all__})

MUST_FAIL = ["test_lexer_state_before_the_first_byte"]
MAY_COST = [2, 4]  # the split is looked up by the lexer state: a mask before the first byte is task 4's too


class ByteMatcher(_solution.ByteMatcher):
    def __init__(self, grammar, parser):  # type: ignore[no-untyped-def]
        super().__init__(grammar, parser)
        self.lexer_state = ()  # the mistake: nothing has started yet

    def feed(self, byte):  # type: ignore[no-untyped-def]
        if self.lexer_state == () and self.parser.checkpoint() == 1:
            self.lexer_state = self._fresh()  # started late, at the first byte
        return super().feed(byte)
