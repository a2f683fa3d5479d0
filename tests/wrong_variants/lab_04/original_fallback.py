"""Wrong on purpose: the lesson's original fix, a full-history decode on every split character.

Correct output, but a CJK or emoji-heavy reply costs O(N) per token.
"""

from mini_vllm.testing.baselines import OriginalWindowDiff

MUST_FAIL = ["test_cost_per_token_is_bounded"]
MAY_COST = [2]


class IncrementalDetokenizer(OriginalWindowDiff):
    pass
