"""Wrong on purpose: a reply that made a call and was then ended by a stop string finishes with
"stop". The client must run the tools, so it finishes with "tool_calls", whatever ended it."""

from instructor.variants import run_reference_with_mistake

MISTAKE = {
    'else "tool_calls" if self._made_calls else "stop"':
        'else "stop" if self.stopped else "tool_calls" if self._made_calls else "stop"',
}
run_reference_with_mistake("lab-02", MISTAKE, globals())

MUST_FAIL = ["test_a_reply_that_made_a_call_finishes_with_tool_calls_whatever_ends_it"]
MAY_COST = [2]
