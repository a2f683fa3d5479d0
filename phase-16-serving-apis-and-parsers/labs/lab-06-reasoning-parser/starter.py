"""Lab 06 starter: split a reply into its reasoning and its content while it streams.

Fill in the tasks below (see README.md, "Your task"). Run the tests with:

    make lab-06
"""

from __future__ import annotations

from collections.abc import Sequence

from mini_vllm.labtypes.lab06 import END_TAG, ReasoningDelta  # given: the lab's value types


def normalize_end_tags(implicit_end_tags: str | Sequence[str]) -> tuple[str, ...]:
    """The implicit end tags as a tuple, duplicates removed; a bare string is one tag.

    Given complete: both parts of the lab validate their tags with this. Raises TypeError
    for a tag that is not a string, and ValueError for an empty tag, for ``</think>``
    itself, or for a tag that contains another.
    """
    tags = [implicit_end_tags] if isinstance(implicit_end_tags, str) else implicit_end_tags
    if not isinstance(tags, Sequence):
        raise TypeError(f"implicit_end_tags must be a list of strings, got {type(implicit_end_tags).__name__}")
    for tag in tags:
        if not isinstance(tag, str):
            raise TypeError(f"every implicit end tag must be a str, got {tag!r} ({type(tag).__name__})")
        if not tag:
            raise ValueError("an empty implicit end tag would end every thought before it starts")
    unique = tuple(dict.fromkeys(tags))
    everything = (END_TAG, *unique)
    # Compare positions, never identities: an equal string built at run time is the same tag.
    for i, tag in enumerate(everything):
        for j, other in enumerate(everything):
            if i != j and other in tag:
                raise ValueError(f"end tag {tag!r} contains {other!r}: tags must not contain each other")
    return unique


def split_reasoning(text: str, starts_in_reasoning: bool = False,
                    implicit_end_tags: Sequence[str] = ("<tool_call>",)) -> tuple[str, str]:
    """``(reasoning, content)`` of a whole reply, by the batch rule in the README."""
    raise NotImplementedError("lab-06 task 1: implement split_reasoning — see README, 'Your task'")


class StreamingReasoningParser:
    """``feed`` text chunks, ``finish`` at the end; each returns a ``ReasoningDelta``.

    For every way of cutting a reply, the deltas must add up to ``split_reasoning`` of
    the whole. Keep two attributes up to date (the tests read them): ``held_text``, the
    suffix that could still become a tag that matters, and ``in_reasoning``, whether the
    parser is inside a thought right now.
    """

    def __init__(self, starts_in_reasoning: bool = False,
                 implicit_end_tags: Sequence[str] = ("<tool_call>",)) -> None:
        raise NotImplementedError(
            "lab-06 task 2: implement StreamingReasoningParser.__init__ — see README, 'Your task'")

    def feed(self, text: str) -> ReasoningDelta:
        """Add the next chunk; return what can be shown now in each channel."""
        raise NotImplementedError("lab-06 task 2: implement StreamingReasoningParser.feed — see README, 'Your task'")

    def finish(self) -> ReasoningDelta:
        """End of the reply: release what is held into the channel it was in."""
        raise NotImplementedError("lab-06 task 3: implement StreamingReasoningParser.finish — see README, 'Your task'")
