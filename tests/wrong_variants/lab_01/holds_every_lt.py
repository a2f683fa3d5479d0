"""Wrong on purpose: holds everything from any "<" until a tag or the end, so "a < b" waits for nothing."""

from typing import Any

from mini_vllm.labs import load_lab

_solution = load_lab("lab-01", "solution")
globals().update({name: value for name, value in vars(_solution).items() if not name.startswith("__")})

MUST_FAIL = ["test_false_alarms_are_released_as_soon_as_they_cannot_be_a_tag",
             "test_no_tag_ever_leaks_and_held_text_is_exactly_a_partial_tag"]
MAY_COST = [4]


class StreamingToolParser(_solution.StreamingToolParser):
    def _consume_prose(self, text: str, out: Any) -> str | None:
        window = self.held_text + text
        if _solution.START_TAG not in window and "<" in window:
            cut = window.index("<")  # the mistake: any "<" might be a tag, forever
            out.content += window[:cut]
            self.held_text = window[cut:]
            return None
        return super()._consume_prose(text, out)
