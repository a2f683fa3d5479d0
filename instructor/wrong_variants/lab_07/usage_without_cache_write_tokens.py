"""Wrong on purpose: the Responses usage leaves `cache_write_tokens` out of `input_tokens_details`.
Easy to miss in a printed usage dict: the failure must name the missing field."""

from instructor.variants import run_reference_with_mistake

MISTAKE = {
    """"input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},""":
    """"input_tokens_details": {"cached_tokens": 0},""",
}
run_reference_with_mistake("lab-07", MISTAKE, globals())

MUST_FAIL = ["test_the_last_event_says_how_the_reply_ended"]
MAY_COST = [3]
