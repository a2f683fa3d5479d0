"""Wrong on purpose: split_reasoning removes </think> again and again until none is left.

`answer </thi</think>nk> end` then loses the `</think>` its own text spells once the model's
tag is gone. The rule is one pass: remove each end tag the model wrote, and nothing else.
"""

from mini_vllm.labs import impl_path

_REFERENCE = impl_path("lab-06", "solution").read_text(encoding="utf-8")
_RIGHT = 'return body[:position], body[after:].replace(END_TAG, "")'
_WRONG = """content = body[after:]
    while END_TAG in content:
        content = content.replace(END_TAG, "")
    return body[:position], content"""
assert _REFERENCE.count(_RIGHT) == 1, "the reference changed: update this variant"
exec(compile(_REFERENCE.replace(_RIGHT, _WRONG), __file__, "exec"))

MUST_FAIL = ["test_removing_an_end_tag_is_one_pass"]
MAY_COST = [1]
