"""Wrong on purpose: the streaming parser starts inside a thought unless told otherwise.

`starts_in_reasoning` defaults to False in the README (only a chat template that wrote
`<think>` makes it true), so a caller that passes nothing gets a reply whose answer is
all filed as thought. The reference with the parser's default flipped.
"""

from mini_vllm.labs import impl_path

_REFERENCE = impl_path("lab-06", "solution").read_text(encoding="utf-8")
_RIGHT = "    def __init__(self, starts_in_reasoning: bool = False,"
_WRONG = "    def __init__(self, starts_in_reasoning: bool = True,"
assert _REFERENCE.count(_RIGHT) == 1, "the reference changed: update this variant"
exec(compile(_REFERENCE.replace(_RIGHT, _WRONG), __file__, "exec"))

MUST_FAIL = ["test_parser_defaults"]
MAY_COST = [2]
