# Appended to lab-07's reference by tests/test_grader_sandbox.py: it keeps the open item's text as one string and
# adds each delta to it (a copy of the whole item per delta), and it forges what the inside meter would report
# (no bytes set aside). In the grading sandbox nothing is asked of the child: the grader counts the pages the
# kernel hands the child fresh, each copy of a long item is that many, and the cost test fails.
_Reference = ResponsesEventFormatter  # noqa: F821 (the reference's class, above)

try:
    import mini_vllm.sandbox.probes as _probes

    _probes.AllocationMeter.measure = lambda self, call: (call(), 0)
except Exception:
    pass


class ResponsesEventFormatter(_Reference):
    def events(self, out):
        events = super().events(out)
        self.__dict__["_parts"] = ["".join(self._parts)]  # the whole item so far, copied on every delta
        return events
