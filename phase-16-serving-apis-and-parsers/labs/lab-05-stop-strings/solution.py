"""Lab 05 reference solution: stop strings, exact for every chunking and held back no longer than needed.

The rule, in one line: text may be shown as soon as no stop string could still start
in it. So after each chunk, hold back exactly the longest suffix that is the beginning
of some stop string, and show the rest. A stop that later completes can only have
started inside that suffix, which is why nothing else needs to be searched again.
"""

from __future__ import annotations

from collections.abc import Sequence


def normalize_stops(stop: str | Sequence[str] | None) -> tuple[str, ...]:
    """The stop strings as a tuple, duplicates removed; a bare string is one stop.

    Raises TypeError for anything that is not a string, and ValueError for an empty
    stop string (it would match before the first character of every reply).
    """
    if stop is None:
        return ()
    stops = [stop] if isinstance(stop, str) else stop
    if not isinstance(stops, Sequence):
        raise TypeError(f"stop must be a string or a list of strings, got {type(stop).__name__}")
    for s in stops:
        if not isinstance(s, str):
            raise TypeError(f"every stop must be a string, got {s!r} ({type(s).__name__})")
        if not s:
            raise ValueError("an empty stop string would match before the first character; remove it")
    return tuple(dict.fromkeys(stops))  # keeps the first of each duplicate, in order


def _earliest_stop(text: str, stops: Sequence[str]) -> tuple[int, int, str] | None:
    """(start, end, stop) of the stop occurrence that ends first; ties go to the earliest start."""
    found = [(start + len(s), start, s) for s in stops if (start := text.find(s)) != -1]
    if not found:
        return None
    end, start, s = min(found)
    return start, end, s


def truncate_at_stop(text: str, stop: str | Sequence[str] | None,
                     include_stop_str_in_output: bool = False) -> tuple[str, str | None]:
    """Cut ``text`` at its first stop string: ``(text up to the stop, the stop)`` or ``(text, None)``.

    "First" means the occurrence that *ends* earliest, since that is the one a stream
    completes first; among stops ending at the same place, the one starting earliest.
    """
    match = _earliest_stop(text, normalize_stops(stop))
    if match is None:
        return text, None
    start, end, s = match
    return text[: end if include_stop_str_in_output else start], s


class StopStringChecker:
    """Applies stop strings to streamed text: ``feed`` chunks, ``flush`` at the end.

    Everything returned by ``feed`` and ``flush`` together equals ``truncate_at_stop``
    of the whole text. ``held_text`` is what is being held back right now.
    """

    def __init__(self, stop: str | Sequence[str] | None, include_stop_str_in_output: bool = False) -> None:
        self.stops = normalize_stops(stop)
        self.include_stop_str_in_output = include_stop_str_in_output
        self.stopped = False
        self.stop_reason: str | None = None
        self.held_text = ""  # shown later: it could still be the start of a stop string
        self._tail = ""  # the same suffix, remembered for matching even when it was shown

    def feed(self, text: str) -> str:
        if not isinstance(text, str):
            raise TypeError(f"feed() takes the next text chunk as a str, got {type(text).__name__}")
        if self.stopped:
            return ""
        window = self._tail + text  # a stop completed by `text` started inside the tail
        already_shown = len(self._tail) - len(self.held_text)
        match = self._first_stop(window)
        if match is not None:
            start, end, self.stop_reason = match
            self.stopped = True
            self.held_text = self._tail = ""
            return window[already_shown : end if self.include_stop_str_in_output else start]
        self._tail = window[len(window) - self._partial_stop_len(window) :]
        self.held_text = "" if self.include_stop_str_in_output else self._tail
        return window[already_shown : len(window) - len(self.held_text)]

    def _first_stop(self, text: str) -> tuple[int, int, str] | None:
        return _earliest_stop(text, self.stops)

    def _partial_stop_len(self, text: str) -> int:
        """Length of the longest suffix of ``text`` that is a proper prefix of some stop."""
        longest = 0
        for s in self.stops:
            for size in range(min(len(s) - 1, len(text)), longest, -1):
                if text.endswith(s[:size]):
                    longest = size
                    break
        return longest

    def flush(self) -> str:
        # End of stream: the held suffix never became a stop, so it is ordinary text.
        text, self.held_text, self._tail = self.held_text, "", ""
        return text
