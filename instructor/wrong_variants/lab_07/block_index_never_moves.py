"""Wrong on purpose: every content block gets index 0 (the count of blocks sent is never raised), so
the anthropic SDK's accumulator, which finds blocks by list position, adds every delta to the first
block."""

from instructor.variants import run_reference_with_mistake

MISTAKE = {
    """        self._open_type = None
        self.blocks_sent += 1
        return events""": """        self._open_type = None
        return events""",
}
run_reference_with_mistake("lab-07", MISTAKE, globals())

MUST_FAIL = ["test_the_anthropic_sdk_rebuilds_your_blocks", "test_blocks_follow_the_grammar_for_every_reply"]
MAY_COST = [4]
