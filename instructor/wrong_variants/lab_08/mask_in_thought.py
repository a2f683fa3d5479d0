"""Wrong on purpose: the mask applies from the first token, thought included.

The model cannot think: its first token must already be `{` (vLLM #16577, #12619).
"""

from mini_vllm.labs import load_lab

_solution = load_lab("lab-08", "solution")
globals().update({name: getattr(_solution, name) for name in _solution.__all__})

MUST_FAIL = ["test_thought_runs_free_then_the_reply_follows_the_schema"]
MAY_COST = [5]


class StructuredSampler(_solution.StructuredSampler):
    def __init__(self, automaton, vocab, allowed_at, *, thinking=False, implicit_end=None):  # type: ignore[no-untyped-def]
        super().__init__(automaton, vocab, allowed_at, thinking=False, implicit_end=implicit_end)
