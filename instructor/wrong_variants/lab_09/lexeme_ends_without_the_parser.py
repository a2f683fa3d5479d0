"""Wrong on purpose: a new lexeme starts as every lexeme of the grammar, not the ones the parser allows.

After `{"n": 12` (an integer) a `.` extends a *number*, so it is allowed, and the lexeme the
matcher grows can never be taken by the parser.
"""

from mini_vllm.labs import load_lab

_solution = load_lab("lab-09", "solution")
globals().update({name: getattr(_solution, name) for name in _solution.__all__})

MUST_FAIL = ["test_a_lexeme_ends_only_where_the_parser_takes_it", "test_bytes_taken_equal_llguidance"]
MAY_COST = [2, 3, 4]  # the trie walk and the split run on your own matcher (over the tests' parser)


class ByteMatcher(_solution.ByteMatcher):
    def _fresh(self):  # type: ignore[no-untyped-def]
        return tuple(sorted((x, a.start) for x, a in enumerate(self._automata)))
