"""Wrong on purpose: once the arguments have started, everything up to the end tag is streamed as
arguments, including the envelope's closing "}" (and whatever else follows the value)."""

import dataclasses
from typing import Any

from mini_vllm.labs import load_lab

_solution = load_lab("lab-01", "solution")
globals().update({name: value for name, value in vars(_solution).items() if not name.startswith("__")})

MUST_FAIL = ["test_the_envelope_brace_is_never_streamed", "test_streamed_calls_equal_what_was_written_for_any_chunking",
             "test_arguments_stream_as_they_are_written_and_are_never_taken_back"]
MAY_COST = [6]


class CallReader(_solution.CallReader):
    def feed(self, text: str) -> Any:
        was_after = self._arguments == "after"
        delta = super().feed(text)
        if self._arguments != "after":
            return delta
        extra = text if was_after else text[self._arguments_end :]  # the mistake: the value never ends
        if not extra:
            return delta
        if delta is not None:
            return dataclasses.replace(delta, arguments_fragment=delta.arguments_fragment + extra)
        if self.name is None:
            self.held.append(extra)
            return None
        return _solution.ToolCallDelta(self.index, None, extra)


class StreamingToolParser(_solution.StreamingToolParser):
    def _consume_prose(self, text: str, out: Any) -> str | None:
        rest = super()._consume_prose(text, out)
        block = self._block
        if block is not None and block.reader is not None and not isinstance(block.reader, CallReader):
            self._block = block._replace(reader=CallReader(block.reader.index))  # this file's reader
        return rest
