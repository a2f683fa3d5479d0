"""Wrong on purpose: a step with several token ids (speculative decoding) is read as if it held only
its first id; the others are lost."""

from collections.abc import Sequence
from typing import Any

from mini_vllm.labs import load_lab

_solution = load_lab("lab-02", "solution")
globals().update({name: value for name, value in vars(_solution).items() if not name.startswith("__")})

MUST_FAIL = ["test_several_tokens_per_step_change_nothing", "test_streamed_chat_reassembles_exactly"]
MAY_COST = [1]


class OutputPipeline(_solution.OutputPipeline):
    def push(self, token_ids: int | Sequence[int]) -> Any:
        first = token_ids if isinstance(token_ids, int) else token_ids[0]  # the mistake
        return super().push(first)
