# Appended to lab-06's reference by tests/test_grader_sandbox.py: it keeps the whole history (every feed
# could re-scan it) and forges what an inside probe would report: characters kept, 0. In the grading
# sandbox nothing is asked of the child; its memory is measured from outside, so the cost test fails.
_Reference = StreamingReasoningParser  # noqa: F821 (the reference's class, above)

try:
    import mini_vllm.sandbox.probes as _probes

    _probes.Introspection.characters_kept = lambda self, obj: 0
    _probes._characters_kept = lambda *args: 0
    _probes.PROBES["Introspection"] = lambda module: type("Forged", (), {"characters_kept": lambda self, o: 0})()
except Exception:
    pass


class StreamingReasoningParser(_Reference):
    def feed(self, text):
        self.__dict__.setdefault("_history", []).append(str(text))  # every chunk, kept
        return super().feed(text)
