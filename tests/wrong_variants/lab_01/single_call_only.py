"""Wrong on purpose: after the first call, everything is prose; a second call is never seen."""

from typing import Any

from mini_vllm.labs import load_lab

_solution = load_lab("lab-01", "solution")
globals().update({name: value for name, value in vars(_solution).items() if not name.startswith("__")})

MUST_FAIL = ["test_two_calls_and_the_text_around_them_stream_through", "test_streaming_equals_batch_for_any_chunking"]
MAY_COST = [4, 6]


class StreamingToolParser(_solution.StreamingToolParser):
    def _consume_prose(self, text: str, out: Any) -> str | None:
        if out.tool_calls or getattr(self, "_had_call", False):  # the mistake: one call per reply
            self._had_call = True
            out.content += self.held_text + text
            self.held_text = ""
            return None
        return super()._consume_prose(text, out)
