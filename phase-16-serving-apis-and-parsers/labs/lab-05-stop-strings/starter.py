"""Lab 05 starter: stop strings, exact for every chunking and held back no longer than needed.

Fill in the tasks below (see README.md, "Your task"). Run the tests with:

    make lab-05
"""

from __future__ import annotations

from collections.abc import Sequence


def normalize_stops(stop: str | Sequence[str] | None) -> tuple[str, ...]:
    """The stop strings as a tuple, duplicates removed; a bare string is one stop.

    Given complete: every part of the lab validates its stops with this.
    Raises TypeError for anything that is not a string, and ValueError for an empty stop.
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


def truncate_at_stop(text: str, stop: str | Sequence[str] | None,
                     include_stop_str_in_output: bool = False) -> tuple[str, str | None]:
    """Cut ``text`` at its first stop string: ``(text up to the stop, the stop)`` or ``(text, None)``.

    "First" = the occurrence that ends earliest; ties go to the one that starts earliest.
    """
    raise NotImplementedError("lab-05 task 1: implement truncate_at_stop — see README, 'Your task'")


class StopStringChecker:
    """Applies stop strings to streamed text: ``feed`` chunks, ``flush`` at the end.

    Everything returned by ``feed`` and ``flush`` together must equal
    ``truncate_at_stop`` of the whole text. Keep ``held_text`` up to date (the tests read
    it), along with ``stopped`` and ``stop_reason``.
    """

    def __init__(self, stop: str | Sequence[str] | None, include_stop_str_in_output: bool = False) -> None:
        raise NotImplementedError("lab-05 task 2: implement StopStringChecker.__init__ — see README, 'Your task'")

    def feed(self, text: str) -> str:
        """Add the next chunk; return the text that can be shown now (maybe "")."""
        raise NotImplementedError("lab-05 task 2: implement StopStringChecker.feed — see README, 'Your task'")

    def flush(self) -> str:
        """End of stream: return what is still held."""
        raise NotImplementedError("lab-05 task 3: implement StopStringChecker.flush — see README, 'Your task'")
