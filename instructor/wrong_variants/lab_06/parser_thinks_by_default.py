"""Wrong on purpose: the streaming parser starts inside a thought unless told otherwise.

`starts_in_reasoning` defaults to False in the README (only a chat template that wrote
`<think>` makes it true), so a caller that passes nothing gets a reply whose answer is
all filed as thought. The reference with the parser's default flipped.
"""

from instructor.variants import run_reference_with_mistake

MISTAKE = {
    '    def __init__(self, starts_in_reasoning: bool = False,':
        '    def __init__(self, starts_in_reasoning: bool = True,',
}
run_reference_with_mistake('lab-06', MISTAKE, globals())

MUST_FAIL = ["test_parser_defaults"]
MAY_COST = [2]
