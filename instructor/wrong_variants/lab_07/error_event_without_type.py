"""Wrong on purpose: the Messages `error` event's error object has a message but no `type`
(Anthropic's error objects name their kind: `api_error`, `overloaded_error`, ...)."""

from instructor.variants import run_reference_with_mistake

MISTAKE = {
    """        return [{"type": "error", "error": {"type": "api_error", "message": message}}]""":
    """        return [{"type": "error", "error": {"message": message}}]""",
}
run_reference_with_mistake("lab-07", MISTAKE, globals())

MUST_FAIL = ["test_a_malformed_call_ends_with_an_error_event"]
MAY_COST = [5]
