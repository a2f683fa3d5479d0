"""Wrong on purpose: split_reasoning removes the first </think> but keeps later ones.

`<think>a</think>b</think>c` must give the answer `bc`: a duplicated end tag is a template
artifact, never meant for the user. The reference without the removal in content.
"""

from mini_vllm.labs import impl_path

_REFERENCE = impl_path("lab-06", "solution").read_text(encoding="utf-8")
_RIGHT, _WRONG = 'body[after:].replace(END_TAG, "")', 'body[after:]'
assert _REFERENCE.count(_RIGHT) == 1, "the reference changed: update this variant"
exec(compile(_REFERENCE.replace(_RIGHT, _WRONG), __file__, "exec"))

MUST_FAIL = ["test_split_reasoning_examples", "test_split_reasoning_follows_the_rule_for_any_text"]
MAY_COST = [1]
