# Appended to lab-08's reference by tests/test_grader_sandbox.py: a slow-but-correct submission.
# Every mask and every index build also steps all 256 bytes from every state (work no trie walk needs),
# through the first way it finds around the counting automaton's count. The cost tests must fail.
_ReferenceMasker, _ReferenceIndex = TokenMasker, TokenIndex  # noqa: F821 (the reference's classes, above)


def _uncounted_step(automaton):
    if not hasattr(automaton, "sandbox_home"):  # a plain automaton (its own copy): nothing counts it anyway
        return automaton.step
    for attempt in (lambda: automaton._automaton.step, lambda: object.__getattribute__(automaton, "_automaton").step,
                    lambda: vars(automaton)["_automaton"].step, lambda: automaton.inner.step):
        try:
            return attempt()
        except Exception:
            pass
    for name in ("steps",):
        try:
            setattr(automaton, name, 0)
        except Exception:
            pass
    try:
        class Quiet(type(automaton)):
            def step(self, state, byte):
                return 0
        original = type(automaton)
        automaton.__class__ = Quiet
        automaton.__class__ = original  # it has nothing to step or decode with, so the swap buys nothing
    except Exception:
        pass
    call = getattr(automaton, "_call", None)
    if call is not None:
        return lambda state, byte: call("step", [state, byte])
    return automaton.step


def _waste(automaton):
    step = _uncounted_step(automaton)
    for state in range(min(getattr(automaton, "num_states", 1), 4)):
        for byte in range(256):
            step(state, byte)


class TokenMasker(_ReferenceMasker):
    def mask(self, state):
        _waste(self._slow_automaton)
        return super().mask(state)

    def __init__(self, automaton, vocab, trie):
        super().__init__(automaton, vocab, trie)
        self._slow_automaton = automaton


class TokenIndex(_ReferenceIndex):
    def __init__(self, automaton, vocab, trie):
        _waste(automaton)
        super().__init__(automaton, vocab, trie)
