# Appended to lab-09's reference by tests/test_grader_sandbox.py (issue 42's table, lab-09 task 1): push takes one
# lexeme of the set it is given. With TRICK = False it is the reference; with the trick it must lose task 1's
# points for "push moves every item waiting for any of them".
TRICK = True

_Reference = EarleyParser  # noqa: F821 (the reference's class, above)


class EarleyParser(_Reference):
    def push(self, lexemes):
        return super().push(frozenset(sorted(lexemes)[:1]) if TRICK else lexemes)
