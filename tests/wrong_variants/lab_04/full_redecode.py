"""Wrong on purpose: decodes the whole history on every token (pitfall: right answer, O(N) per token).

It is the reference with one change: the context never moves forward. It starts at token 0
and stays there, so each push decodes everything from the first prompt token on.
"""

from mini_vllm.labs import load_lab

_solution = load_lab("lab-04", "solution")

MUST_FAIL = ["test_cost_per_token_is_bounded"]
MAY_COST = [2]


class IncrementalDetokenizer(_solution.IncrementalDetokenizer):
    def _move_to(self, read: int) -> None:
        # The mistake: the context is the whole history (prefix pinned at 0, always a boundary).
        self._read = read
        self._prefix = 0
        self._context_text = self._decode(self.tokens[:read])
        self._texts = {read: self._context_text}
