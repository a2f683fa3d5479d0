"""Wrong on purpose: shows prose at once, even a suffix that is the start of "<tool_call>"."""

from typing import Any

from mini_vllm.labs import load_lab

_solution = load_lab("lab-01", "solution")
globals().update({name: value for name, value in vars(_solution).items() if not name.startswith("__")})

MUST_FAIL = ["test_a_partial_tag_is_held_not_leaked", "test_streaming_equals_batch_for_any_chunking",
             "test_no_tag_ever_leaks_and_held_text_is_exactly_a_partial_tag", "test_fifty_random_slicings"]
MAY_COST = [4, 6]


class StreamingToolParser(_solution.StreamingToolParser):
    def _consume_prose(self, text: str, out: Any) -> str | None:
        if _solution.START_TAG not in self.held_text + text:
            out.content += self.held_text + text  # the mistake: no hold-back
            self.held_text = ""
            return None
        return super()._consume_prose(text, out)
