"""Wrong on purpose: looks for the stop inside each chunk alone, so a split stop walks past it."""

from mini_vllm.labs import load_lab

_solution = load_lab("lab-05", "solution")
normalize_stops = _solution.normalize_stops
truncate_at_stop = _solution.truncate_at_stop

MUST_FAIL = ["test_a_split_stop_is_not_leaked", "test_streaming_equals_batch_for_any_chunking",
             "test_an_emoji_stop_matches_across_byte_tokens"]
MAY_COST = [2]


class StopStringChecker(_solution.StopStringChecker):
    def feed(self, text: str) -> str:
        if self.stopped:
            return ""
        shown, self.stop_reason = truncate_at_stop(text, self.stops, self.include_stop_str_in_output)
        self.stopped = self.stop_reason is not None
        return shown
