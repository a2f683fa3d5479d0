"""Wrong on purpose: ``flush`` returns nothing (pitfall: a reply cut off mid-character loses its U+FFFD).

It is the reference with one change: flush moves past the pending tokens but does not show them.
"""

from mini_vllm.labs import load_lab

_solution = load_lab("lab-04", "solution")

MUST_FAIL = ["test_flush_releases_a_cut_off_character", "test_flush_releases_exactly_what_was_held"]
MAY_COST = [3]


class IncrementalDetokenizer(_solution.IncrementalDetokenizer):
    def flush(self) -> str:
        super().flush()
        return ""  # the mistake: what was held is dropped
