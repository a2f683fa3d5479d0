"""Wrong on purpose: whatever arrives in the same delta after a call's end tag is thrown away."""

from typing import Any

from mini_vllm.labs import load_lab

_solution = load_lab("lab-01", "solution")
globals().update({name: value for name, value in vars(_solution).items() if not name.startswith("__")})

MUST_FAIL = ["test_prose_arriving_with_an_end_tag_is_kept", "test_streaming_equals_batch_for_any_chunking",
             "test_fifty_random_slicings"]
MAY_COST = [4, 6]


class StreamingToolParser(_solution.StreamingToolParser):
    def _consume_block(self, text: str, out: Any) -> str | None:
        rest = super()._consume_block(text, out)
        return None if rest is None else ""  # the mistake: the rest of the delta is lost
