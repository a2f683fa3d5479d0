"""Wrong on purpose: finish() always releases the held text as content.

A thought cut short by max_tokens ('... </thi') ends with a piece of it shown as the answer.
"""

from mini_vllm.labs import load_lab

_solution = load_lab("lab-06", "solution")
globals().update({name: value for name, value in vars(_solution).items() if not name.startswith("__")})

MUST_FAIL = ["test_a_thought_cut_short_stays_a_thought", "test_finish_releases_the_held_text_into_its_channel",
             "test_finish_releases_held_text_for_any_stream"]
MAY_COST = [3]


class StreamingReasoningParser(_solution.StreamingReasoningParser):
    def finish(self) -> object:
        last = super().finish()
        return _solution.ReasoningDelta(content=last.reasoning + last.content)
