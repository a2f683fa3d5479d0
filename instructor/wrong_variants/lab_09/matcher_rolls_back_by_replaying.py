"""Wrong on purpose (a cost bug): a rollback starts over and reads every byte from the start again.

Its checkpoint is the number of bytes read so far; rolling back returns the parser to its first
state and feeds the bytes up to the mark once more. The matcher ends where it should, so every
mask is right, but a rollback costs the whole input so far instead of the parser's own rollback,
and a trie walk pays it at every node.
"""

from mini_vllm.labs import load_lab

_solution = load_lab("lab-09", "solution")
globals().update({name: getattr(_solution, name) for name in _solution.__all__})

MUST_FAIL = ["test_rollback_costs_the_stack_not_the_input_so_far", "test_the_parser_is_asked_only_where_a_lexeme_ends"]
MAY_COST = [2, 4]  # the split's cost tests count what masks ask of the matcher


class ByteMatcher(_solution.ByteMatcher):
    def __init__(self, grammar, parser):  # type: ignore[no-untyped-def]
        super().__init__(grammar, parser)
        self._first = (self.lexer_state, self._parser_mark)
        self._read = bytearray()

    def feed(self, byte):  # type: ignore[no-untyped-def]
        taken = super().feed(byte)
        if taken:
            self._read.append(byte)
        return taken

    def checkpoint(self):  # type: ignore[no-untyped-def]
        return Mark(self.lexer_state, len(self._read))  # noqa: F821 (Mark comes from the solution's names)

    def rollback(self, mark):  # type: ignore[no-untyped-def]
        again = bytes(self._read[: mark.parser])
        self.lexer_state, self._parser_mark = self._first
        self.parser.rollback(self._parser_mark)
        self._read.clear()
        for byte in again:
            self.feed(byte)
