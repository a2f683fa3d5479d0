"""Wrong on purpose: removes anything that looks like a think tag from the answer, closing '>' or not.

'<thinking about it>' loses its '<think', and a '<think>' the answer quotes disappears too:
only '</think>' may be removed, and only whole.
"""

import re
from typing import Any

from mini_vllm.labs import load_lab

_solution = load_lab("lab-06", "solution")
globals().update({name: value for name, value in vars(_solution).items() if not name.startswith("__")})

MUST_FAIL = ["test_split_reasoning_examples", "test_split_reasoning_follows_the_rule_for_any_text",
             "test_streaming_equals_batch_for_any_chunking", "test_held_text_is_exactly_the_ambiguous_suffix",
             "test_fifty_random_slicings"]
MAY_COST = [1, 2]

_THINK_LIKE = re.compile(r"</?think>?")


def split_reasoning(text: str, starts_in_reasoning: bool = False,
                    implicit_end_tags: tuple[str, ...] = ("<tool_call>",)) -> tuple[str, str]:
    reasoning, content = _solution.split_reasoning(text, starts_in_reasoning, implicit_end_tags)
    return reasoning, _THINK_LIKE.sub("", content)


class StreamingReasoningParser(_solution.StreamingReasoningParser):
    def _answer(self, window: str, out: Any) -> None:
        before = out.content
        super()._answer(window, out)
        out.content = before + _THINK_LIKE.sub("", out.content[len(before) :])
