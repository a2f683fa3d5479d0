"""Wrong on purpose: always holds back len(longest tag) - 1 characters, whether they could start a tag or not.

Never leaks, always late: every thought and every answer lags behind the model for nothing.
"""

from mini_vllm.labs import load_lab

_solution = load_lab("lab-06", "solution")
globals().update({name: value for name, value in vars(_solution).items() if not name.startswith("__")})

MUST_FAIL = ["test_starts_in_reasoning_when_the_template_wrote_think", "test_false_alarms_are_released_at_once",
             "test_held_text_is_exactly_the_ambiguous_suffix"]
MAY_COST = [2]


class StreamingReasoningParser(_solution.StreamingReasoningParser):
    def _reason(self, window: str, out: object) -> str:
        if _solution._first_tag(window, self.reasoning_end_tags) is not None:
            return super()._reason(window, out)  # type: ignore[arg-type]
        lag = max(len(tag) for tag in self.reasoning_end_tags) - 1
        keep_from = max(0, len(window) - lag)
        out.reasoning += window[:keep_from]  # type: ignore[attr-defined]
        self.held_text = window[keep_from:]
        return ""

    def _answer(self, window: str, out: object) -> None:
        *complete, last = window.split(_solution.END_TAG)
        keep_from = max(0, len(last) - (len(_solution.END_TAG) - 1))
        out.content += "".join(complete) + last[:keep_from]  # type: ignore[attr-defined]
        self.held_text = last[keep_from:]
