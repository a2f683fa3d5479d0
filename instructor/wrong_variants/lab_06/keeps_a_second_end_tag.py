"""Wrong on purpose: split_reasoning removes the first </think> but keeps later ones.

`<think>a</think>b</think>c` must give the answer `bc`: a duplicated end tag is a template
artifact, never meant for the user. The reference without the removal in content.
"""

from instructor.variants import run_reference_with_mistake

MISTAKE = {
    'body[after:].replace(END_TAG, "")':
        'body[after:]',
}
run_reference_with_mistake('lab-06', MISTAKE, globals())

MUST_FAIL = ["test_split_reasoning_examples", "test_split_reasoning_follows_the_rule_for_any_text"]
MAY_COST = [1]
