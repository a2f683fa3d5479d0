"""Wrong on purpose: the partial-tag search goes on after its first (longest) match.

For a tag that repeats its own start (`[[tool]]`: both `[` and `[[` begin it), the search
for the longest held suffix keeps looking at shorter sizes and ends on the shortest, so
after `plan [[` only one `[` is held and the other leaks into the thought. The reference
without the `break` in `_partial_start`.
"""

from instructor.variants import run_reference_with_mistake

MISTAKE = {
    '                break\n':
        '                continue\n',
}
run_reference_with_mistake('lab-06', MISTAKE, globals())

MUST_FAIL = ["test_a_tag_that_repeats_its_own_start", "test_held_text_is_exactly_the_ambiguous_suffix"]
MAY_COST = [2]
