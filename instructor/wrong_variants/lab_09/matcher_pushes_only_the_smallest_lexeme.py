"""Wrong on purpose: where a lexeme ends, the matcher pushes only the smallest complete lexeme (rule 3 says all).

`"x"` is complete as the first branch's literal and as the second branch's string; pushing the
literal alone refuses `{"k": "x", "b": 1}`, which llguidance and lark's Earley parser accept.
"""

from mini_vllm.labs import load_lab

_solution = load_lab("lab-09", "solution")
globals().update({name: getattr(_solution, name) for name in _solution.__all__})

MUST_FAIL = ["test_all_complete_lexemes_are_one_push"]
MAY_COST = [2, 3, 4]  # the trie walk and the split run on your own matcher (over the tests' parser)


class ByteMatcher(_solution.ByteMatcher):
    def _complete(self, state):  # type: ignore[no-untyped-def]
        return frozenset(sorted(super()._complete(state))[:1])  # the mistake: one complete lexeme, not all
