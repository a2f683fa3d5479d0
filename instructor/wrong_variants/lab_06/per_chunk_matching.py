"""Wrong on purpose: looks for tags inside each chunk alone and holds nothing back.

'<thi' + 'nk>' and '</thi' + 'nk>' walk straight past it: the tag leaks into a channel.
"""

from typing import Any

from mini_vllm.labs import load_lab

_solution = load_lab("lab-06", "solution")
globals().update({name: value for name, value in vars(_solution).items() if not name.startswith("__")})

MUST_FAIL = ["test_a_split_open_tag_is_not_leaked", "test_a_split_end_tag_is_not_leaked",
             "test_qwen3_reply_one_character_at_a_time", "test_streaming_equals_batch_for_any_chunking",
             "test_held_text_is_exactly_the_ambiguous_suffix", "test_fifty_random_slicings"]
MAY_COST = [2]


class StreamingReasoningParser(_solution.StreamingReasoningParser):
    def _open(self, window: str) -> str:
        rest = window.lstrip()
        if rest.startswith(_solution.START_TAG):
            self._mode = _solution._REASONING
            return rest[len(_solution.START_TAG) :]
        self._mode = _solution._CONTENT  # this chunk does not open a thought, so nothing does
        return window

    def _reason(self, window: str, out: Any) -> str:
        found = _solution._first_tag(window, self.reasoning_end_tags)
        if found is None:  # no whole tag in this chunk: all of it is thought, a partial tag included
            out.reasoning += window
            return ""
        return super()._reason(window, out)

    def _answer(self, window: str, out: Any) -> None:
        out.content += window.replace(_solution.END_TAG, "")  # only whole tags inside this chunk are removed
