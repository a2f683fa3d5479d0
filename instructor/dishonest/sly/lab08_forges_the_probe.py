# Appended to lab-08's reference by tests/test_grader_sandbox.py: every state keeps its own copy of its mask,
# and the submission hides it two ways. It forges what a probe inside its process would report (integers
# kept: 0), and it sets memory aside when it is imported and gives it back while it builds, so two readings
# of its memory taken around the build would show it shrinking. In the grading sandbox nothing is asked of
# the child, and its memory is counted from before the import: the test fails.
_Reference = TokenIndex  # noqa: F821 (the reference's class, above)

try:
    import mini_vllm.sandbox.probes as _probes

    _probes.Introspection.integers_kept = lambda self, obj: 0
    _probes._integers_kept = lambda *args: 0
    _probes.PROBES["Introspection"] = lambda module: type("Forged", (), {"integers_kept": lambda self, o: 0})()
except Exception:
    pass

_set_aside = [bytearray(b"\x01") * 2**20 for _ in range(64)]  # 64 MiB, every page touched


class TokenIndex(_Reference):
    def __init__(self, automaton, vocab, trie):
        super().__init__(automaton, vocab, trie)
        self._masks = [list(mask) for mask in self._masks]  # a copy per state
        _set_aside.clear()  # given back as the copies are made
