# Appended to lab-05's reference by tests/test_grader_sandbox.py: a slow-but-correct submission.
# It copies every stop without a counted read (str's own C functions, the stand-in's fields, a class
# swap) and then re-tests every prefix of every stop on every chunk, on its copies: quadratic work
# that a count kept in the child would never see. The cost test must fail.
_Reference = StopStringChecker  # noqa: F821 (the reference's class, above)
_fallbacks_of = _fallback_table  # noqa: F821


def _copy(stop):
    for attempt in (lambda: str.__str__(stop), lambda: "".join(str.__iter__(stop)), lambda: str.__getitem__(stop, slice(None)),
                    lambda: stop.encode().decode(), lambda: vars(stop).get("text")):
        try:
            copied = attempt()
            if isinstance(copied, str) and len(copied) == len(stop):
                return copied
        except Exception:
            pass
    try:
        stop.__class__ = str  # type: ignore[misc]
    except Exception:
        pass
    return str.__str__(stop)


class StopStringChecker(_Reference):
    def __init__(self, stop, include_stop_str_in_output=False):
        super().__init__(stop, include_stop_str_in_output)
        try:
            type(self.stops[0]).read = 0  # a counter by assignment, if it is one here
        except Exception:
            pass
        self.stops = tuple(_copy(s) for s in self.stops)
        self._fallbacks = [_fallbacks_of(s) for s in self.stops]

    def feed(self, text):
        shown = super().feed(text)
        for stop in self.stops:  # the quadratic habit: every prefix of every stop, again
            for k in range(1, len(stop) + 1):
                self.held_text.endswith(stop[:k])
        return shown
