"""Wrong on purpose: the arguments are re-serialised with json.dumps, in the complete call and in the
stream (one fragment when the block closes), instead of being passed on as the model wrote them."""

import json
from typing import Any

from mini_vllm.labs import load_lab

_solution = load_lab("lab-01", "solution")
globals().update({name: value for name, value in vars(_solution).items() if not name.startswith("__")})

MUST_FAIL = ["test_parse_call_keeps_the_arguments_text_as_written",
             "test_parse_call_keeps_any_arguments_text_as_written",
             "test_fragments_are_the_text_as_written_not_re_serialised",
             "test_streamed_calls_equal_what_was_written_for_any_chunking",
             "test_arguments_stream_as_they_are_written_and_are_never_taken_back"]
MAY_COST = [1, 6]


def parse_call(raw: str) -> Any:
    call = _solution.parse_call(raw)
    return _solution.ToolCall(call.name, call.arguments, json.dumps(call.arguments, ensure_ascii=False))  # the mistake


class CallReader(_solution.CallReader):
    def feed(self, text: str) -> Any:
        had_name = self._name_sent
        delta = super().feed(text)
        if delta is None or had_name:
            return None  # fragments are replaced by the re-serialised text at the end
        return _solution.ToolCallDelta(delta.index, delta.name, "")


class StreamingToolParser(_solution.StreamingToolParser):
    def _consume_prose(self, text: str, out: Any) -> str | None:
        rest = super()._consume_prose(text, out)
        block = self._block
        if block is not None and block.reader is not None and not isinstance(block.reader, CallReader):
            self._block = block._replace(reader=CallReader(block.reader.index))  # this file's reader
        return rest

    def _consume_block(self, text: str, out: Any) -> str | None:
        reader, closed = self._block.reader if self._block else None, len(out.tool_calls)
        rest = super()._consume_block(text, out)
        if reader is not None and len(out.tool_calls) > closed:
            call = out.tool_calls[-1]
            text_again = json.dumps(call.arguments, ensure_ascii=False)
            out.tool_calls[-1] = _solution.ToolCall(call.name, call.arguments, text_again)
            out.tool_call_deltas.append(_solution.ToolCallDelta(reader.index, None, text_again))
        return rest
