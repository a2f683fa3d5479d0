"""Wrong on purpose: the lexer's split is cached by which lexemes are live, not by where each one stands.

Inside a string of at most 8 characters, the split after `"a` is reused after `"abcdefgh`, so a
ninth character is allowed.
"""

from typing import Any

from mini_vllm.labs import load_lab

_solution = load_lab("lab-09", "solution")
globals().update({name: getattr(_solution, name) for name in _solution.__all__})

MUST_FAIL = ["test_split_is_keyed_by_the_whole_lexer_state", "test_split_equals_the_definition"]
MAY_COST = [4]


class LexerCache(_solution.LexerCache):
    def _entry(self, lexer_state: Any, root: int) -> Any:
        key = (frozenset(x for x, _ in lexer_state), root)
        found = self._splits.get(key)
        if found is None:
            found = self._splits[key] = self._compute(tuple(lexer_state), root)
        return found
