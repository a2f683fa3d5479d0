# Appended to lab-09's reference by tests/test_grader_sandbox.py (issue 42's table, lab-09 task 3): the trie is
# built again in every mask(). With TRICK = False it is the reference; with the trick it must lose task 3's
# points for "build the trie once in __init__" (the tests count what is read of the vocabulary).
TRICK = True

_Reference = TrieMasker  # noqa: F821 (the reference's class, above)


class TrieMasker(_Reference):
    def mask(self, matcher):
        if TRICK:
            self._trie = _Trie(self.vocab.tokens)  # noqa: F821 (the reference's trie, above)
        return super().mask(matcher)
