"""Wrong on purpose (vLLM #29725): a call's arguments go out as response.output_text.delta events."""

from typing import Any

from mini_vllm.labs import load_lab

_solution = load_lab("lab-07", "solution")
globals().update({name: value for name, value in vars(_solution).items() if not name.startswith("__")})

MUST_FAIL = ["test_a_call_is_a_function_call_item", "test_call_items_follow_the_grammar_for_every_reply",
             "test_arguments_done_equals_the_joined_deltas"]
MAY_COST = [2]


class ResponsesEventFormatter(_solution.ResponsesEventFormatter):
    def call_delta(self, delta: Any) -> list[dict[str, Any]]:
        events = super().call_delta(delta)
        for event in events:
            if event["type"] == "response.function_call_arguments.delta":
                event.update(type="response.output_text.delta", content_index=0, logprobs=[])
        return events
