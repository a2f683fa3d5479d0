"""Wrong on purpose: the parser accepts as soon as the root's rule is complete anywhere, begun where it may.

`{"a": {}` completes an object (the inner one), so EOS is allowed with the outer `{` still open:
the reply reaches the client as broken JSON.
"""

from mini_vllm.labs import load_lab

_solution = load_lab("lab-09", "solution")
globals().update({name: getattr(_solution, name) for name in _solution.__all__})

MUST_FAIL = ["test_accepts_only_with_every_bracket_closed", "test_parser_agrees_with_llguidance_step_by_step"]
MAY_COST = [1]


class EarleyParser(_solution.EarleyParser):
    def accepts(self) -> bool:
        roots = {rhs[0] for lhs, rhs in zip(self._lhs, self._rhs, strict=True) if lhs == self._start}
        return any(dot == len(self._rhs[rule]) and (self._lhs[rule] == self._start or self._lhs[rule] in roots)
                   for rule, dot, _origin in self._sets[-1].items)
