"""Wrong on purpose: feed refuses everything after finish() before it looks at what it got.

`feed(None)` after the end raises RuntimeError ("the reply is over") instead of naming the
bad input: bad input gets a TypeError that says what was wrong, whenever it comes. The
reference with its two checks in the other order.
"""

from instructor.variants import run_reference_with_mistake

# The "after finish" check moved above the type check.
MISTAKE = {
    """    def feed(self, text: str) -> ReasoningDelta:
        if not isinstance(text, str):""": """    def feed(self, text: str) -> ReasoningDelta:
        if self._finished:
            raise RuntimeError("feed() after finish(): this reply is over")
        if not isinstance(text, str):""",
}
run_reference_with_mistake('lab-06', MISTAKE, globals())

MUST_FAIL = ["test_bad_input_after_finish_is_still_named"]
MAY_COST = [2]
