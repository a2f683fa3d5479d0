"""Wrong on purpose: decides the arguments are complete as soon as the braces it has sent balance
(counting braces inside strings too); when more text arrives, it takes that back by sending the
arguments again from the start. A client cannot un-receive a fragment: it now holds them twice."""

import dataclasses
from typing import Any

from mini_vllm.labs import load_lab

_solution = load_lab("lab-01", "solution")
globals().update({name: value for name, value in vars(_solution).items() if not name.startswith("__")})

MUST_FAIL = ["test_streamed_calls_equal_what_was_written_for_any_chunking",
             "test_arguments_stream_as_they_are_written_and_are_never_taken_back"]
MAY_COST = [6]


class CallReader(_solution.CallReader):
    def feed(self, text: str) -> Any:
        delta = super().feed(text)
        if delta is None or not delta.arguments_fragment:
            return delta
        sent: str = getattr(self, "_sent", "")
        fragment = delta.arguments_fragment
        if sent and sent.count("{") == sent.count("}"):  # it looked finished, yet more came:
            fragment = sent + fragment  # the mistake: start the arguments over
        self._sent = sent + delta.arguments_fragment
        return dataclasses.replace(delta, arguments_fragment=fragment)


class StreamingToolParser(_solution.StreamingToolParser):
    def _consume_prose(self, text: str, out: Any) -> str | None:
        rest = super()._consume_prose(text, out)
        block = self._block
        if block is not None and block.reader is not None and not isinstance(block.reader, CallReader):
            self._block = block._replace(reader=CallReader(block.reader.index))  # this file's reader
        return rest
