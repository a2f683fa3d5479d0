"""Wrong on purpose: every delta of a call carries its name again (the bug behind `get_weatherget_weather`)."""

from mini_vllm.labs import lab_dir

MUST_FAIL = ["test_name_is_sent_once_then_the_arguments_as_they_are_written",
             "test_streamed_calls_equal_what_was_written_for_any_chunking",
             "test_arguments_stream_as_they_are_written_and_are_never_taken_back"]
MAY_COST = [6]

# The reference solution with one mistake: each (old, new) pair replaces whole lines of it.
MISTAKE = [
    (r'''
        delta = ToolCallDelta(self.index, None if self._name_sent else self.name, "".join(self.held))
''', r'''
        delta = ToolCallDelta(self.index, self.name, "".join(self.held))  # the mistake: the name every time
'''),
]
_wrong = (lab_dir("lab-01") / "solution.py").read_text(encoding="utf-8")
for _old, _new in MISTAKE:
    assert _wrong.count(_old) == 1, f"the reference changed: update this variant ({_old.strip()[:40]})"
    _wrong = _wrong.replace(_old, _new)
exec(compile(_wrong, __file__, "exec"))
