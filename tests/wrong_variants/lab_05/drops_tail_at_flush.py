"""Wrong on purpose: at the end of the stream, a held false alarm is thrown away instead of shown."""

from mini_vllm.labs import load_lab

_solution = load_lab("lab-05", "solution")
normalize_stops = _solution.normalize_stops
truncate_at_stop = _solution.truncate_at_stop

MUST_FAIL = ["test_flush_releases_a_false_alarm_at_the_end", "test_streaming_equals_batch_for_any_chunking",
             "test_fifty_random_slicings"]


class StopStringChecker(_solution.StopStringChecker):
    def flush(self) -> str:
        super().flush()
        return ""
