"""Wrong on purpose: decides the arguments are complete as soon as the braces it has sent balance
(counting braces inside strings too); when more text arrives, it takes that back by sending the
arguments again from the start. A client cannot un-receive a fragment: it now holds them twice."""

import dataclasses
from typing import Any

from mini_vllm.labs import lab_dir

MUST_FAIL = ["test_streamed_calls_equal_what_was_written_for_any_chunking",
             "test_arguments_stream_as_they_are_written_and_are_never_taken_back"]
MAY_COST = [6]

exec(compile((lab_dir("lab-01") / "solution.py").read_text(encoding="utf-8"), __file__, "exec"))  # the reference
_ReferenceReader = CallReader  # noqa: F821 (defined by the exec above)


class CallReader(_ReferenceReader):  # the parser looks CallReader up in this module, so it gets this one
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
