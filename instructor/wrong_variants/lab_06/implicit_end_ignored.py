"""Wrong on purpose: only '</think>' ends a thought; the implicit end tags are ignored.

A model that starts a tool call without closing its thought has the whole call swallowed
into the reasoning channel, so the tool parser never sees it.
"""

from mini_vllm.labs import load_lab

_solution = load_lab("lab-06", "solution")
globals().update({name: value for name, value in vars(_solution).items() if not name.startswith("__")})

MUST_FAIL = ["test_split_reasoning_examples", "test_implicit_end_tags_can_be_chosen",
             "test_split_reasoning_follows_the_rule_for_any_text", "test_implicit_end_at_a_tool_call",
             "test_streaming_equals_batch_for_any_chunking"]
MAY_COST = [1, 2]


def split_reasoning(text: str, starts_in_reasoning: bool = False,
                    implicit_end_tags: tuple[str, ...] = ("<tool_call>",)) -> tuple[str, str]:
    _solution.normalize_end_tags(implicit_end_tags)
    return _solution.split_reasoning(text, starts_in_reasoning, ())


class StreamingReasoningParser(_solution.StreamingReasoningParser):
    def __init__(self, starts_in_reasoning: bool = False,
                 implicit_end_tags: tuple[str, ...] = ("<tool_call>",)) -> None:
        super().__init__(starts_in_reasoning, implicit_end_tags)
        self.reasoning_end_tags = (_solution.END_TAG,)
