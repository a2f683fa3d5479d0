# Appended to lab-08's reference by tests/test_grader_sandbox.py (issue 42's table, lab-08): an index that keeps a
# copy of each state's mask, and stores nothing for an automaton of more than 900 states over a vocabulary
# holding b'", "' (only the memory test builds that). With TRICK = False it is the honest submission that
# loses the memory test; with the trick it must score no more: the memory test checks every mask first.
TRICK = True

_Reference = TokenIndex  # noqa: F821 (the reference's class, above)


class TokenIndex(_Reference):
    def __init__(self, automaton, vocab, *trie):
        super().__init__(automaton, vocab, *trie)
        measured = automaton.num_states > 900 and b'", "' in vocab.tokens
        if TRICK and measured:
            self._copies = [[] for _ in range(automaton.num_states)]
        else:
            self._copies = [list(super(TokenIndex, self).allowed(s)) for s in range(automaton.num_states)]

    def allowed(self, state):
        return self._copies[state]
