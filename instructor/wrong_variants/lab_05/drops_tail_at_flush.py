"""Wrong on purpose: at the end of the stream, a held false alarm is thrown away instead of shown."""

from mini_vllm.labs import load_lab

_solution = load_lab("lab-05", "solution")
normalize_stops = _solution.normalize_stops
truncate_at_stop = _solution.truncate_at_stop

MUST_FAIL = [
    "test_flush_releases_a_false_alarm_at_the_end",
    "test_flush_twice_gives_the_tail_once",
    "test_flush_releases_exactly_what_is_held",
]
MAY_COST = [3]


class StopStringChecker(_solution.StopStringChecker):
    def flush(self) -> str:
        super().flush()
        return ""
