"""Wrong on purpose: always holds back max(len(stop)) - 1 characters, whether they could start a stop or not.

Never leaks, always late: every reply lags behind the model for nothing.
"""

from mini_vllm.labs import load_lab

_solution = load_lab("lab-05", "solution")
normalize_stops = _solution.normalize_stops
truncate_at_stop = _solution.truncate_at_stop

MUST_FAIL = ["test_nothing_is_held_that_cannot_become_a_stop",
             "test_only_the_ambiguous_suffix_is_held_not_a_fixed_lag",
             "test_no_stop_ever_leaks_and_held_text_is_exactly_the_ambiguous_suffix"]
MAY_COST = [2]


class StopStringChecker(_solution.StopStringChecker):
    def _partial_stop_len(self, text: str) -> int:
        return min(len(text), max((len(s) for s in self.stops), default=1) - 1)
