# Appended to lab-09's reference by tests/test_grader_sandbox.py (issue 42's table, lab-09, rule 3): where a lexeme
# ends, the matcher pushes only the smallest complete lexeme. With TRICK = False it is the reference; with the
# trick it must lose task 2's points for rule 3 (`{"k": "x", "b": 1}` in an anyOf of a literal and a string).
TRICK = True

_Reference = ByteMatcher  # noqa: F821 (the reference's class, above)


class ByteMatcher(_Reference):
    def _complete(self, state):
        complete = super()._complete(state)
        return frozenset(sorted(complete)[:1]) if TRICK else complete
