"""Wrong on purpose: holds the SHORTEST suffix that could start a stop, not the longest.

With stop "aab", after "xaa" it holds only "a" and shows "xa". When "b" arrives, the
stop began inside text the user has already seen, and since only "a" was kept for
matching, "ab" no longer contains "aab": the stop is missed altogether.
"""

from mini_vllm.labs import load_lab

_solution = load_lab("lab-05", "solution")
normalize_stops = _solution.normalize_stops
truncate_at_stop = _solution.truncate_at_stop

MUST_FAIL = ["test_no_stop_ever_leaks_and_held_text_is_exactly_the_ambiguous_suffix",
             "test_streaming_equals_batch_for_any_chunking"]
MAY_COST = [2]


class StopStringChecker(_solution.StopStringChecker):
    def _partial_stop_len(self, text: str) -> int:
        sizes = [size for s in self.stops for size in range(1, min(len(s) - 1, len(text)) + 1)
                 if text.endswith(s[:size])]
        return min(sizes, default=0)
