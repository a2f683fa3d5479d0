"""Wrong on purpose: every delta of a call carries its name again (the bug behind `get_weatherget_weather`)."""

from typing import Any

from mini_vllm.labs import load_lab

_solution = load_lab("lab-01", "solution")
globals().update({name: value for name, value in vars(_solution).items() if not name.startswith("__")})

MUST_FAIL = ["test_name_is_sent_once_then_the_arguments_as_they_are_written",
             "test_streamed_calls_equal_what_was_written_for_any_chunking",
             "test_arguments_stream_as_they_are_written_and_are_never_taken_back"]
MAY_COST = [6]


class CallReader(_solution.CallReader):
    def feed(self, text: str) -> Any:
        delta = super().feed(text)
        if delta is not None and delta.name is None:
            delta = _solution.ToolCallDelta(delta.index, self.name, delta.arguments_fragment)  # the mistake
        return delta


class StreamingToolParser(_solution.StreamingToolParser):
    def _consume_prose(self, text: str, out: Any) -> str | None:
        rest = super()._consume_prose(text, out)
        block = self._block
        if block is not None and block.reader is not None and not isinstance(block.reader, CallReader):
            self._block = block._replace(reader=CallReader(block.reader.index))  # this file's reader
        return rest
