"""Wrong on purpose: a feed that meets a malformed call raises, but keeps what it changed before that
(the held text, the open block, the count of calls): the next good input no longer goes on from
where the parser was."""

from mini_vllm.labs import lab_dir

MUST_FAIL = ["test_a_failed_feed_is_as_if_it_never_happened"]
MAY_COST = [4, 6]

# The reference solution with one mistake: each (old, new) pair replaces whole lines of it.
MISTAKE = [
    (r'''
            vars(self).update(saved)
            raise
''', r'''
            raise  # the mistake: no rollback
'''),
]
_wrong = (lab_dir("lab-01") / "solution.py").read_text(encoding="utf-8")
for _old, _new in MISTAKE:
    assert _wrong.count(_old) == 1, f"the reference changed: update this variant ({_old.strip()[:40]})"
    _wrong = _wrong.replace(_old, _new)
exec(compile(_wrong, __file__, "exec"))
