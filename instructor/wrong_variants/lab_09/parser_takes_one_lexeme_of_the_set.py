"""Wrong on purpose: ``push`` takes one lexeme of the set it is given (the smallest id), not all of them.

The lexemes of a set read the same bytes: `"x"` is the first branch's literal and the second
branch's string. Keeping one reading drops the other, so `{"k": "x", "b": 1}` (the string's
branch) is refused after the literal was kept.
"""

from mini_vllm.labs import load_lab

_solution = load_lab("lab-09", "solution")
globals().update({name: getattr(_solution, name) for name in _solution.__all__})

MUST_FAIL = ["test_push_takes_a_set_and_keeps_every_reading"]
MAY_COST = [1]


class EarleyParser(_solution.EarleyParser):
    def push(self, lexemes: frozenset[int]) -> bool:
        return super().push(frozenset(sorted(lexemes)[:1]))  # the mistake: one reading only
