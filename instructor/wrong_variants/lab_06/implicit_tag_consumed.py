"""Wrong on purpose: an implicit end tag is consumed like '</think>' instead of kept in the content.

The thought ends at '<tool_call>', but the tag is gone, so the tool parser downstream sees
bare JSON and shows it to the user as prose.
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
    tags = _solution.normalize_end_tags(implicit_end_tags)
    body = text
    if not starts_in_reasoning:
        stripped = text.lstrip()
        if not stripped.startswith(_solution.START_TAG):
            return "", text.replace(_solution.END_TAG, "")
        body = stripped[len(_solution.START_TAG) :]
    found = _solution._first_tag(body, (_solution.END_TAG, *tags))
    if found is None:
        return body, ""
    position, tag = found
    return body[:position], body[position + len(tag) :].replace(_solution.END_TAG, "")  # every end tag eaten


class StreamingReasoningParser(_solution.StreamingReasoningParser):
    def _reason(self, window: str, out: object) -> str:
        found = _solution._first_tag(window, self.reasoning_end_tags)
        rest = super()._reason(window, out)  # type: ignore[arg-type]
        if found is not None and found[1] != _solution.END_TAG:
            rest = rest[len(found[1]) :]  # the implicit tag, dropped
        return rest
