"""Wrong on purpose: once the arguments have started, everything up to the end tag is streamed as
arguments, including the envelope's closing "}" (and whatever else follows the value)."""

from mini_vllm.labs import lab_dir

MUST_FAIL = ["test_the_envelope_brace_is_never_streamed",
             "test_streamed_calls_equal_what_was_written_for_any_chunking",
             "test_arguments_stream_as_they_are_written_and_are_never_taken_back"]
MAY_COST = [6]

# The reference solution with one mistake: each (old, new) pair replaces whole lines of it.
MISTAKE = [
    (r'''
            self._state = "key?" if char == "," else "done"
        return False
''', r'''
            self._state = "key?" if char == "," else "done"
        return self._owner == "arguments"  # the mistake: what follows the value is streamed too
'''),
]
_wrong = (lab_dir("lab-01") / "solution.py").read_text(encoding="utf-8")
for _old, _new in MISTAKE:
    assert _wrong.count(_old) == 1, f"the reference changed: update this variant ({_old.strip()[:40]})"
    _wrong = _wrong.replace(_old, _new)
exec(compile(_wrong, __file__, "exec"))
