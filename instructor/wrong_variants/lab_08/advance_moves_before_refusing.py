"""Wrong on purpose: advance moves the state byte by byte, then refuses the token halfway.

The error is raised, but the state it leaves behind has already read part of a token
that was never output, so the next good token is judged from the wrong place.
"""

from mini_vllm.labs import load_lab

_solution = load_lab("lab-08", "solution")
globals().update({name: getattr(_solution, name) for name in _solution.__all__})

MUST_FAIL = ["test_refused_token_raises_and_changes_nothing"]
MAY_COST = [3]


class GrammarCursor(_solution.GrammarCursor):
    def advance(self, token_id: int) -> None:
        data = self.vocab.tokens[token_id] if 0 <= token_id < len(self.vocab) else None
        if data is None or token_id == self.vocab.eos_token_id:
            super().advance(token_id)
            return
        for position, byte in enumerate(data):
            there = self.automaton.step(self.state, byte)
            if there == DEAD:  # noqa: F821
                raise TokenRejected(token_id, self.state, f"its byte {position} ({byte:02x}) cannot follow")  # noqa: F821
            self.state = there
        self.pending = _solution._unfinished_tail(self.pending + data)
