"""Hypothesis strategies shared by every lab's tests (one place, as in minitorch).

The byte and text strategies lean towards the inputs that break streaming code:
UTF-8 lead and continuation bytes, the invalid ones, and multi-byte characters. The
tool-call strategy builds replies from known parts, so parsers can be checked exactly.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any, TypeVar

from hypothesis import strategies as st

T = TypeVar("T", str, bytes)

# Bytes chosen from every row of the UTF-8 table, including the edges of each range.
INTERESTING_BYTES: tuple[int, ...] = (
    0x00, 0x41, 0x7F,              # ASCII
    0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF,  # continuation bytes (edges of the narrowed ranges)
    0xC0, 0xC1, 0xC2, 0xC3, 0xDF,  # 2-byte leads (C0/C1 invalid)
    0xE0, 0xE4, 0xED, 0xEF,        # 3-byte leads (E0 and ED narrow the next byte)
    0xF0, 0xF4, 0xF5, 0xFF,        # 4-byte leads (F0/F4 narrow the next byte, F5.. invalid)
)

# A few characters of every UTF-8 length, including ones the shipped BPE splits.
MULTILINGUAL_CHARS = "aZ09 \n!<>é€ü—ñ你好服务器乱码字节日本語한국어🚀🫨😊🍜🇫🇷"


def any_bytes(max_size: int = 40) -> st.SearchStrategy[bytes]:
    """Arbitrary bytes, biased towards UTF-8 structure and real encoded text."""
    biased = st.lists(st.sampled_from(INTERESTING_BYTES) | st.integers(0, 255), max_size=max_size).map(bytes)
    encoded = multilingual_text(max_size=max_size // 3).map(lambda text: text.encode("utf-8"))
    # Real text with random bytes dropped: truncated and orphaned sequences.
    damaged = st.tuples(encoded, st.sets(st.integers(0, max_size))).map(
        lambda pair: bytes(b for i, b in enumerate(pair[0]) if i not in pair[1])
    )
    return st.one_of(biased, encoded, damaged)


def multilingual_text(max_size: int = 40) -> st.SearchStrategy[str]:
    """Text mixing ASCII, accents, CJK, emoji (and any other code point now and then)."""
    alphabet = st.sampled_from(MULTILINGUAL_CHARS) | st.characters(exclude_categories=["Cs"])
    return st.text(alphabet=alphabet, max_size=max_size)


@st.composite
def chunkings(draw: st.DrawFn, whole: T) -> list[T]:
    """Any split of ``whole`` into non-empty consecutive pieces."""
    cuts = draw(st.sets(st.integers(1, max(1, len(whole) - 1)), max_size=len(whole))) if len(whole) > 1 else set()
    return split_at(whole, sorted(cuts))


def split_at(whole: T, cuts: Sequence[int]) -> list[T]:
    """``whole`` cut at the given positions (any order; repeats and positions outside it are ignored)."""
    bounds = [0, *sorted({c for c in cuts if 0 < c < len(whole)}), len(whole)]
    return [whole[a:b] for a, b in pairwise(bounds)]


def cut_points(max_position: int = 40) -> st.SearchStrategy[list[int]]:
    """Positions to cut a text at, for :func:`split_at`.

    Drawn apart from the text (unlike :func:`chunkings`), so a test can pin a chunking
    with ``@example(text=..., cuts=[...])``.
    """
    return st.lists(st.integers(1, max_position), max_size=max_position)


# ---------------------------------------------------------------- tool-call replies

TOOL_START, TOOL_END = "<tool_call>", "</tool_call>"
# Prose made of the characters that trouble a tag parser: pieces of the tags, quotes, CJK, emoji.
PROSE_CHARS = "ab <>/_tolcal\n\"{}你🫨é"


@dataclass(frozen=True)
class GeneratedReply:
    """A model reply built from known parts, so a parser's answer can be checked exactly."""

    text: str
    prose: str  # all text outside the blocks, in order
    calls: list[tuple[str, dict[str, Any]]]  # (name, arguments) of each block, in order
    blocks: list[tuple[int, int]]  # [start, end) of each block in `text`, tags included


# Strategies are built once, here, not inside the composites below: hypothesis validates a
# strategy the first time it draws from it, and rebuilding them on every draw made
# generating a reply cost more than testing a parser on it.
_TRICKY_PIECES = [*'a "\\<>/_{}你好🫨\n', TOOL_END, TOOL_START]
_TRICKY_TEXT = st.lists(st.sampled_from(_TRICKY_PIECES), max_size=6).map("".join)
_JSON_LEAVES = st.none() | st.booleans() | st.integers(-1000, 1000) | _TRICKY_TEXT
# Two levels of nesting below the arguments object (so braces three deep in all), spelled
# out rather than drawn with st.recursive, which costs twice as much per example.
_JSON_SHALLOW = st.lists(_JSON_LEAVES, max_size=3) | st.dictionaries(_TRICKY_TEXT, _JSON_LEAVES, max_size=3)
# JSON values whose strings hold what breaks naive parsers: quotes, backslashes, end tags, CJK, emoji.
JSON_VALUES = (_JSON_LEAVES | _JSON_SHALLOW | st.lists(_JSON_SHALLOW, max_size=2)
               | st.dictionaries(_TRICKY_TEXT, _JSON_SHALLOW, max_size=2))
CALL_NAMES = st.text("abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=12)
CALL_ARGUMENTS = st.dictionaries(st.text("abc_", min_size=1, max_size=5), JSON_VALUES, max_size=3)
# Prose never holds a whole start tag (it would open a block): a drawn one becomes the near
# miss "<tool call>" (a map, not a filter: cheaper, and the near miss is worth testing too).
PROSE_PIECES = st.text(PROSE_CHARS, max_size=12).map(lambda s: s.replace(TOOL_START, "<tool call>"))
BLOCK_PADDING = st.sampled_from(["", "\n", " "])


@st.composite
def tool_call_replies(draw: st.DrawFn, max_calls: int = 3) -> GeneratedReply:
    """Prose and well-formed tool-call blocks, interleaved, rendered the way a model writes them."""
    calls = draw(st.lists(st.tuples(CALL_NAMES, CALL_ARGUMENTS), max_size=max_calls))
    prose = [draw(PROSE_PIECES) for _ in range(len(calls) + 1)]
    text, blocks = prose[0], []
    for (name, arguments), after in zip(calls, prose[1:], strict=True):
        body = json.dumps({"name": name, "arguments": arguments}, ensure_ascii=draw(st.booleans()))
        padding = draw(BLOCK_PADDING)
        block = TOOL_START + padding + body + padding + TOOL_END
        blocks.append((len(text), len(text) + len(block)))
        text += block + after
    return GeneratedReply(text, "".join(prose), calls, blocks)


# ---------------------------------------------------------------- reasoning replies

# Pieces of text that trouble a <think> parser: whole tags, halves of tags, near misses,
# whitespace (which may come before the opening tag), and a few wider characters.
REASONING_PIECES: tuple[str, ...] = (
    "<think>", "</think>", "<tool_call>", "<thi", "nk>", "</thi", "</", "<", ">", "/", "think", "<thinking",
    "</b>", "<tool", "_call>", "<|tool|>", " ", "\n", "\t", "a", "é", "你", "🫨",
)
IMPLICIT_END_TAG_CHOICES: tuple[tuple[str, ...], ...] = ((), ("<tool_call>",), ("<tool_call>", "<|tool|>"))


def reasoning_replies(max_pieces: int = 16) -> st.SearchStrategy[str]:
    """Replies built from tag pieces and near misses, or from a small tag-heavy alphabet."""
    pieces = st.lists(st.sampled_from(REASONING_PIECES), max_size=max_pieces).map("".join)
    return pieces | st.text("<>/thinkol_c \n🫨", max_size=3 * max_pieces)


def cut_positions(max_size: int = 40) -> st.SearchStrategy[set[int]]:
    """Where to cut a text into chunks (positions past its end are ignored by :func:`cut`)."""
    return st.sets(st.integers(1, 4 * max_size), max_size=max_size)


def cut(whole: str, positions: set[int]) -> list[str]:
    """``whole`` cut at those of ``positions`` that fall inside it."""
    return split_at(whole, sorted(p for p in positions if 0 < p < len(whole)))


# --------------------------------------------------- tool calls written token by token


@dataclass(frozen=True)
class WrittenCall:
    """One call as the model wrote it, with where its parts sit in the reply's text."""

    name: str
    arguments: dict[str, Any]
    arguments_text: str  # the JSON text of the arguments, exactly as written
    name_end: int  # offset just after the name's closing quote: from here on the name is known
    arguments_start: int  # offset of the arguments value's first character
    body: str  # the block between its tags, as parse_call receives it

    @property
    def arguments_end(self) -> int:
        return self.arguments_start + len(self.arguments_text)


@dataclass(frozen=True)
class WrittenReply:
    """A reply built from known prose and known calls, each call spelled in one of many ways."""

    text: str
    prose: str
    calls: list[WrittenCall]


# How a model may lay out the envelope and the arguments: compact, spaced, indented.
JSON_LAYOUTS: tuple[dict[str, Any], ...] = (
    {"separators": (",", ":")}, {}, {"indent": 2}, {"indent": 1, "separators": (" ,", " : ")},
)
# One draw per call for its spelling: (arguments layout, ASCII escapes?, colon, comma, space
# inside the braces, padding inside the tags, "name" first?).
CALL_SPELLINGS = st.tuples(st.sampled_from(JSON_LAYOUTS), st.booleans(), st.sampled_from([":", ": ", " : "]),
                           st.sampled_from([",", ", ", ",\n  "]), st.sampled_from(["", " ", "\n  "]),
                           BLOCK_PADDING, st.booleans())


@st.composite
def written_tool_call_replies(draw: st.DrawFn, max_calls: int = 3) -> WrittenReply:
    """Prose and well-formed calls whose envelope is rendered by hand, so the arguments'
    raw text and offsets are known: key order ("arguments" may come first), spacing,
    indentation, ASCII escapes or raw CJK/emoji, and strings holding ``}``, ``"``, ``\\``
    and ``</tool_call>``."""
    calls = draw(st.lists(st.tuples(CALL_NAMES, CALL_ARGUMENTS, CALL_SPELLINGS), max_size=max_calls))
    text = draw(PROSE_PIECES)
    prose, written = [text], []
    for name, args, (layout, ensure_ascii, colon, comma, inner, padding, name_first) in calls:
        arguments_text = json.dumps(args, ensure_ascii=ensure_ascii, **layout)
        name_json = json.dumps(name)
        head = text + TOOL_START + padding + "{" + inner
        if name_first:  # as most models write it
            name_end = len(head) + len('"name"' + colon + name_json)
            arguments_start = name_end + len(comma + '"arguments"' + colon)
            body = '"name"' + colon + name_json + comma + '"arguments"' + colon + arguments_text
        else:  # "arguments" first: the arguments must wait for the name
            arguments_start = len(head) + len('"arguments"' + colon)
            body = '"arguments"' + colon + arguments_text + comma + '"name"' + colon + name_json
            name_end = len(head) + len(body)
        after = draw(PROSE_PIECES)
        whole_body = padding + "{" + inner + body + inner.replace(" ", "") + "}" + padding
        text = text + TOOL_START + whole_body + TOOL_END + after
        written.append(WrittenCall(name, args, arguments_text, name_end, arguments_start, whole_body))
        prose.append(after)
    return WrittenReply(text, "".join(prose), written)
