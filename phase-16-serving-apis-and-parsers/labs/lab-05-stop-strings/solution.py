"""Lab 05 reference solution: stop strings, exact for every chunking and held back no longer than needed.

The rule, in one line: text may be shown as soon as no stop string could still start
in it. So after each chunk, hold back exactly the longest suffix that is the beginning
of some stop string, and show the rest. A stop that later completes can only have
started inside that suffix, which is why nothing else needs to be searched again.
The streaming checker keeps, per stop, the length of that suffix as a running count, so
no chunk costs more than its own length times the number of stops.
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

    For each stop the checker remembers how many of its first characters the text seen so
    far ends with (a Knuth-Morris-Pratt state), and moves that count one character at a
    time. So a chunk costs (its length x the number of stops) steps, plus the held part
    copied once, however long the stops are; the held part is the longest such count.
    Re-testing every candidate length of every stop on every chunk would cost each stop's
    length squared per token: 100 stops of 15,000 characters froze a server for a minute.
    """

    def __init__(self, stop: str | Sequence[str] | None, include_stop_str_in_output: bool = False) -> None:
        self.stops = normalize_stops(stop)
        self.include_stop_str_in_output = include_stop_str_in_output
        self.stopped = False
        self.stop_reason: str | None = None
        self.held_text = ""  # shown later: it could still be the start of a stop string
        self._fallbacks = [_fallback_table(s) for s in self.stops]
        self._matched = [0] * len(self.stops)  # per stop: how many of its first characters the text ends with

    def feed(self, text: str) -> str:
        if not isinstance(text, str):
            raise TypeError(f"feed() takes the next text chunk as a str, got {type(text).__name__}")
        if self.stopped:
            return ""
        window = self.held_text + text  # a stop completed by `text` started inside the held part (or in `text`)
        match = self._first_stop(window)
        if match is not None:
            start, end, self.stop_reason = match
            self.stopped = True
            self.held_text = ""
            return window[: end if self.include_stop_str_in_output else start]
        if self.include_stop_str_in_output:
            return window  # nothing is hidden; the counts still remember a stop that began in shown text
        held = self._partial_stop_len(window)
        self.held_text = window[len(window) - held :] if held else ""
        return window[: len(window) - held]

    def _first_stop(self, window: str) -> tuple[int, int, str] | None:
        """(start, end, stop) in ``window`` of the first stop the new chunk (the window after the held part)
        completes, moving every stop's count over the chunk."""
        found = self._advance(window[len(self.held_text) :])
        if found is None:
            return None
        end = len(self.held_text) + found[0]
        return end - len(found[1]), end, found[1]

    def _partial_stop_len(self, window: str) -> int:
        """Length of the longest suffix of ``window`` that is a proper prefix of some stop: the largest count."""
        return min(max(self._matched, default=0), len(window))

    def _advance(self, text: str) -> tuple[int, str] | None:
        """Move every stop's count over ``text``; at the first character where a stop completes, return
        (its end in ``text``, the stop). Of stops completing on the same character, the longest started first."""
        stops, fallbacks, matched = self.stops, self._fallbacks, self._matched
        for position, char in enumerate(text, start=1):
            completed = None
            for i, s in enumerate(stops):
                count = matched[i]
                while count and s[count] != char:
                    count = fallbacks[i][count - 1]
                if s[count] == char:
                    count += 1
                if count == len(s):
                    if completed is None or len(s) > len(completed):
                        completed = s
                    count = fallbacks[i][count - 1]
                matched[i] = count
            if completed is not None:
                return position, completed
        return None

    def flush(self) -> str:
        # End of stream: the held suffix never became a stop, so it is ordinary text.
        text, self.held_text = self.held_text, ""
        self._matched = [0] * len(self.stops)
        return text


def _fallback_table(stop: str) -> list[int]:
    """``table[k]``: the longest proper prefix of ``stop[:k + 1]`` that is also its suffix (KMP's failure
    function). When the next character does not extend a match of ``count`` characters, the next-longest
    match still alive is ``table[count - 1]`` characters long."""
    table = [0] * len(stop)
    count = 0
    for k in range(1, len(stop)):
        while count and stop[k] != stop[count]:
            count = table[count - 1]
        if stop[k] == stop[count]:
            count += 1
        table[k] = count
    return table
