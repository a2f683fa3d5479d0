"""Wrong on purpose: once the name is out, CallReader.feed answers every piece of text with a
ToolCallDelta, an empty one when the text brought no argument character (the envelope's "}", the
whitespace and keys around the arguments), instead of None. Every client then receives deltas
that say nothing."""

from mini_vllm.labs import lab_dir

MUST_FAIL = ["test_arguments_written_before_the_name_wait_for_it"]
MAY_COST = [6]

# The reference solution with one mistake: each (old, new) pair replaces whole lines of it.
MISTAKE = [
    (r'''
        if self.name is None or (self._name_sent and not self.held):
            return None
''', r'''
        if self.name is None:  # the mistake: an empty delta when there is nothing to send
            return None
'''),
]
_wrong = (lab_dir("lab-01") / "solution.py").read_text(encoding="utf-8")
for _old, _new in MISTAKE:
    assert _wrong.count(_old) == 1, f"the reference changed: update this variant ({_old.strip()[:40]})"
    _wrong = _wrong.replace(_old, _new)
exec(compile(_wrong, __file__, "exec"))
