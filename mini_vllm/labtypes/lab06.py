"""Lab 06's given values: the thought's tags and what one step adds to each channel."""

from __future__ import annotations

from dataclasses import dataclass

START_TAG = "<think>"
END_TAG = "</think>"


@dataclass
class ReasoningDelta:
    """What one step adds to each channel."""

    reasoning: str = ""
    content: str = ""


