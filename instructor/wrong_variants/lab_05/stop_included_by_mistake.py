"""Wrong on purpose: shows the stop string itself, as if include_stop_str_in_output were always on."""

from collections.abc import Sequence

from mini_vllm.labs import load_lab

_solution = load_lab("lab-05", "solution")
normalize_stops = _solution.normalize_stops
truncate_at_stop = _solution.truncate_at_stop

MUST_FAIL = ["test_a_split_stop_is_not_leaked", "test_streaming_equals_batch_for_any_chunking",
             "test_no_stop_ever_leaks_and_held_text_is_exactly_the_ambiguous_suffix"]
MAY_COST = [2]


class StopStringChecker(_solution.StopStringChecker):
    def __init__(self, stop: str | Sequence[str] | None, include_stop_str_in_output: bool = False) -> None:
        super().__init__(stop, include_stop_str_in_output=True)
