"""Wrong on purpose: the first stop *in list order* that occurs wins, not the one that ends first."""

from collections.abc import Sequence

from mini_vllm.labs import load_lab

_solution = load_lab("lab-05", "solution")
normalize_stops = _solution.normalize_stops

MUST_FAIL = ["test_truncate_at_stop_examples", "test_overlapping_stops_earliest_end_wins",
             "test_two_stops_completing_in_one_chunk", "test_truncate_follows_the_rule_for_any_text"]
MAY_COST = [1, 2]


def _list_order_stop(text: str, stops: Sequence[str]) -> tuple[int, int, str] | None:
    for s in stops:
        if (start := text.find(s)) != -1:
            return start, start + len(s), s
    return None


def truncate_at_stop(text: str, stop: str | Sequence[str] | None,
                     include_stop_str_in_output: bool = False) -> tuple[str, str | None]:
    match = _list_order_stop(text, normalize_stops(stop))
    if match is None:
        return text, None
    start, end, s = match
    return text[: end if include_stop_str_in_output else start], s


class StopStringChecker(_solution.StopStringChecker):
    def _first_stop(self, text: str) -> tuple[int, int, str] | None:
        return _list_order_stop(text, self.stops)
