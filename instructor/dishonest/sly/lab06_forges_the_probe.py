# Appended to lab-06's reference by tests/test_grader_sandbox.py: it keeps the whole history (every feed
# could re-scan it) and hides it two ways. It forges what an inside probe would report (characters kept: 0),
# and it sets memory aside when it is imported and gives back a MiB for each MiB of history it keeps, so two
# readings of its memory would show nothing grown. In the grading sandbox nothing is asked of the child, and
# its memory is counted from before the import: the cost test fails.
_Reference = StreamingReasoningParser  # noqa: F821 (the reference's class, above)

try:
    import mini_vllm.sandbox.probes as _probes

    _probes.Introspection.characters_kept = lambda self, obj: 0
    _probes._characters_kept = lambda *args: 0
    _probes.PROBES["Introspection"] = lambda module: type("Forged", (), {"characters_kept": lambda self, o: 0})()
except Exception:
    pass

_set_aside = [bytearray(b"\x01") * 2**20 for _ in range(32)]  # 32 MiB, every page touched


class StreamingReasoningParser(_Reference):
    def feed(self, text):
        history = self.__dict__.setdefault("_history", [])
        history.append(str(text))  # every chunk, kept
        self.__dict__["_kept"] = self.__dict__.get("_kept", 0) + len(text)
        while self._kept > 2**20 and _set_aside:  # a MiB kept, a MiB given back
            self.__dict__["_kept"] -= 2**20
            _set_aside.pop()
        return super().feed(text)
