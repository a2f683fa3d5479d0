"""Wrong on purpose (vLLM PR #24938's shape): a thinking block is never signed or closed; the next block just opens."""

from typing import Any

from mini_vllm.labs import load_lab

_solution = load_lab("lab-07", "solution")
globals().update({name: value for name, value in vars(_solution).items() if not name.startswith("__")})

MUST_FAIL = ["test_a_thinking_block_is_signed_and_closed", "test_blocks_follow_the_grammar_for_every_reply",
             "test_thinking_blocks_only_when_thinking_is_enabled"]
MAY_COST = [4]


class MessagesEventFormatter(_solution.MessagesEventFormatter):
    def close(self, status: str = "completed") -> list[dict[str, Any]]:
        if self._open_type == "thinking":
            self._open_type = None
            self.blocks_sent += 1
            return []
        return super().close(status)
