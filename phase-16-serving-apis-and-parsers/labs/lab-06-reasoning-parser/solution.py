"""Lab 06 reference solution: split a reply into its reasoning and its content while it streams.

A reasoning model writes ``<think> thoughts </think> answer``. The parser is a small
state machine with three modes, and in each mode only a few tags matter:

- **opening** (nothing decided yet): leading whitespace and a prefix of ``<think>``;
- **reasoning**: ``</think>`` (consumed) and the implicit end tags (kept, they begin the content);
- **content**: ``</think>`` again, a duplicate the user must never see.

Whatever could still become one of the tags that matter is held back; everything else
goes out at once. Each feed looks only at ``held_text + chunk``, so the cost per
character does not grow with the reply.
"""

from __future__ import annotations

from collections.abc import Sequence

from mini_vllm.labtypes.lab06 import END_TAG, START_TAG, ReasoningDelta  # given: the lab's value types

_OPENING, _REASONING, _CONTENT = "opening", "reasoning", "content"  # the three modes


def normalize_end_tags(implicit_end_tags: str | Sequence[str]) -> tuple[str, ...]:
    """The implicit end tags as a tuple, duplicates removed; a bare string is one tag.

    Raises TypeError for a tag that is not a string, and ValueError for an empty tag, for
    ``</think>`` itself, or for a tag that contains another (then "which tag comes first"
    would depend on how the text is cut).
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
    tags = normalize_end_tags(implicit_end_tags)
    if starts_in_reasoning:
        body = text
    else:
        stripped = text.lstrip()
        if not stripped.startswith(START_TAG):
            return "", text.replace(END_TAG, "")  # no opening: all of it is the answer (a later <think> is text)
        body = stripped[len(START_TAG) :]
    found = _first_tag(body, (END_TAG, *tags))
    if found is None:
        return body, ""  # never closed: all of it is thought
    position, tag = found
    after = position + len(END_TAG) if tag == END_TAG else position  # an implicit end stays in the content
    return body[:position], body[after:].replace(END_TAG, "")


def _first_tag(text: str, tags: Sequence[str]) -> tuple[int, str] | None:
    """(start, tag) of the tag occurrence that starts first in ``text``, or None."""
    hits = [(start, tag) for tag in tags if (start := text.find(tag)) != -1]
    return min(hits) if hits else None


def _partial_start(text: str, tags: Sequence[str]) -> int:
    """Where the longest suffix of ``text`` that is a proper prefix of some tag begins (``len(text)`` if none)."""
    longest = 0
    for tag in tags:
        for size in range(min(len(tag) - 1, len(text)), longest, -1):
            if text.endswith(tag[:size]):
                longest = size
                break
    return len(text) - longest


class StreamingReasoningParser:
    """``feed`` text chunks, ``finish`` at the end; each returns a ``ReasoningDelta``.

    For every way of cutting a reply, the deltas add up to ``split_reasoning`` of the
    whole. ``held_text`` is exactly the suffix that could still become a tag that
    matters; ``in_reasoning`` says whether the parser is inside a thought.
    """

    def __init__(self, starts_in_reasoning: bool = False,
                 implicit_end_tags: Sequence[str] = ("<tool_call>",)) -> None:
        self.reasoning_end_tags = (END_TAG, *normalize_end_tags(implicit_end_tags))
        self._mode = _REASONING if starts_in_reasoning else _OPENING
        self.held_text = ""
        self.in_reasoning = starts_in_reasoning
        self._finished = False

    def feed(self, text: str) -> ReasoningDelta:
        if not isinstance(text, str):
            raise TypeError(f"feed() takes the next text chunk as a str, got {type(text).__name__}")
        if self._finished:
            raise RuntimeError("feed() after finish(): this reply is over")
        out = ReasoningDelta()
        window, self.held_text = self.held_text + text, ""
        if self._mode == _OPENING:
            window = self._open(window)
        if self._mode == _REASONING:
            window = self._reason(window, out)
        if self._mode == _CONTENT:
            self._answer(window, out)
        self.in_reasoning = self._mode == _REASONING
        return out

    def _open(self, window: str) -> str:
        """Decide whether the reply opens a thought; return what follows the decision (or hold it all)."""
        rest = window.lstrip()
        if rest.startswith(START_TAG):
            self._mode = _REASONING  # the whitespace and the tag belong to neither channel
            return rest[len(START_TAG) :]
        if START_TAG.startswith(rest):  # only whitespace, then maybe the start of "<think>": wait
            self.held_text = window
            return ""
        self._mode = _CONTENT  # anything else: the whole reply is the answer
        return window

    def _reason(self, window: str, out: ReasoningDelta) -> str:
        """Show thought up to an end tag (returning what follows), or up to a possible partial tag."""
        found = _first_tag(window, self.reasoning_end_tags)
        if found is None:
            keep_from = _partial_start(window, self.reasoning_end_tags)
            out.reasoning = window[:keep_from]
            self.held_text = window[keep_from:]
            return ""
        position, tag = found
        out.reasoning = window[:position]
        self._mode = _CONTENT
        return window[position + len(END_TAG) :] if tag == END_TAG else window[position:]

    def _answer(self, window: str, out: ReasoningDelta) -> None:
        """Show the answer with every ``</think>`` removed, holding a possible partial one."""
        *complete, last = window.split(END_TAG)
        keep_from = _partial_start(last, (END_TAG,))
        out.content = "".join(complete) + last[:keep_from]
        self.held_text = last[keep_from:]

    def finish(self) -> ReasoningDelta:
        """End of the reply: what is held was never a tag, so it goes to the channel it was in."""
        if self._finished:
            raise RuntimeError("finish() was already called for this reply")
        self._finished = True
        held, self.held_text = self.held_text, ""
        # Undecided (whitespace, "<thi") is content; a thought cut short is still a thought.
        return ReasoningDelta(reasoning=held) if self._mode == _REASONING else ReasoningDelta(content=held)
