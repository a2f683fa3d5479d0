"""Wrong on purpose: stop_reason 'end_turn' after a tool call, so an agent loop never runs the tool."""

from typing import Any

from mini_vllm.labs import load_lab

_solution = load_lab("lab-07", "solution")
globals().update({name: value for name, value in vars(_solution).items() if not name.startswith("__")})

MUST_FAIL = ["test_stop_reason_says_how_the_reply_ended", "test_the_message_lifecycle_holds_for_every_reply"]
MAY_COST = [5]


class MessagesEventFormatter(_solution.MessagesEventFormatter):
    def end(self, finish_reason: str, output_tokens: int, stop_reason: str | None = None) -> list[dict[str, Any]]:
        return super().end("stop" if finish_reason == "tool_calls" else finish_reason, output_tokens, stop_reason)
