"""Wrong on purpose (a cost bug): every checkpoint of the matcher asks the parser for its own.

The masks are right, but a trie walk inside a string then calls the parser once per trie node,
where nothing ends and the parser has nothing to say.
"""

from mini_vllm.labs import load_lab

_solution = load_lab("lab-09", "solution")
globals().update({name: getattr(_solution, name) for name in _solution.__all__})

MUST_FAIL = ["test_the_parser_is_asked_only_where_a_lexeme_ends"]
MAY_COST = [2]


class ByteMatcher(_solution.ByteMatcher):
    def checkpoint(self):  # type: ignore[no-untyped-def]
        self._parser_mark = self.parser.checkpoint()
        return Mark(self.lexer_state, self._parser_mark)  # noqa: F821 (Mark comes from the solution's names)
