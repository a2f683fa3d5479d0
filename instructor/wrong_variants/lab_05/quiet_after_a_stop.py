"""Wrong on purpose: after a stop, feed returns "" before it looks at what it was given.

So ``feed(None)`` after the reply stopped is silently accepted: a caller with a bug
(a None chunk, bytes instead of text) learns nothing. Bad input gets a clear error
whenever it comes. The reference with the stopped check moved before the type check.
"""

from instructor.variants import run_reference_with_mistake

MISTAKE = {
    """    def feed(self, text: str) -> str:
        if not isinstance(text, str):""": """    def feed(self, text: str) -> str:
        if self.stopped:
            return ""
        if not isinstance(text, str):""",
}
run_reference_with_mistake('lab-05', MISTAKE, globals())

MUST_FAIL = ["test_bad_input_after_a_stop_still_raises"]
MAY_COST = [2]
