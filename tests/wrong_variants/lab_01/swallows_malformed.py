"""Wrong on purpose: a malformed call is dropped silently instead of raising."""

from typing import Any

from mini_vllm.labs import load_lab

_solution = load_lab("lab-01", "solution")
globals().update({name: value for name, value in vars(_solution).items() if not name.startswith("__")})

MUST_FAIL = ["test_malformed_call_raises_with_the_raw_text", "test_malformed_block_in_a_reply_is_loud",
             "test_malformed_call_in_a_stream_raises_and_changes_nothing"]
MAY_COST = [1, 3, 4, 6]


def parse_call(raw: str) -> Any:
    try:
        return _solution.parse_call(raw)
    except _solution.ToolCallParseError:
        return None  # the mistake: the call silently disappears


def parse_tool_calls(text: str) -> Any:
    try:
        return _solution.parse_tool_calls(text)
    except _solution.ToolCallParseError:
        return _solution.ParsedOutput("", [])  # the mistake: the reply and its call vanish


class StreamingToolParser(_solution.StreamingToolParser):
    def feed(self, delta: str) -> Any:
        try:
            return super().feed(delta)
        except _solution.ToolCallParseError:
            self._block = None
            return _solution.DeltaMessage()
