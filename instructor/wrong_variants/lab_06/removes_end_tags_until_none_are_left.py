"""Wrong on purpose: split_reasoning removes </think> again and again until none is left.

`answer </thi</think>nk> end` then loses the `</think>` its own text spells once the model's
tag is gone. The rule is one pass: remove each end tag the model wrote, and nothing else.
"""

from instructor.variants import run_reference_with_mistake

MISTAKE = {
    'return body[:position], body[after:].replace(END_TAG, "")': """content = body[after:]
    while END_TAG in content:
        content = content.replace(END_TAG, "")
    return body[:position], content""",
}
run_reference_with_mistake('lab-06', MISTAKE, globals())

MUST_FAIL = ["test_removing_an_end_tag_is_one_pass"]
MAY_COST = [1]
