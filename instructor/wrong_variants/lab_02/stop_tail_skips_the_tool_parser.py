"""Wrong on purpose: finish sends what the stop checker still held straight to the client, past the
tool parser. When that tail is the end of a call (its last brace and `</tool_call>`, held because a
stop string starts the same way), the tool parser never sees it, and its finish() raises lab-01's
ToolCallParseError for a call that was well formed."""

from instructor.variants import run_reference_with_mistake

MISTAKE = {
    "out = self._route(self._stops.feed(answer) + self._stops.flush())":
        "out = self._route(self._stops.feed(answer))\n        out.text += self._stops.flush()",
}
run_reference_with_mistake("lab-02", MISTAKE, globals())

MUST_FAIL = ["test_finish_completes_a_call_whose_end_a_stop_string_held"]
MAY_COST = [2]
