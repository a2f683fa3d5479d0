"""Wrong on purpose: after the first call, everything is prose; a second call is never seen."""

from mini_vllm.labs import lab_dir

MUST_FAIL = ["test_two_calls_and_the_text_around_them_stream_through",
             "test_streaming_equals_batch_for_any_chunking"]
MAY_COST = [4, 6]

# The reference solution with one mistake: each (old, new) pair replaces whole lines of it.
MISTAKE = [
    (r'''
        start = window.find(START_TAG)
''', r'''
        start = window.find(START_TAG) if self._calls_opened == 0 else -1  # the mistake: one call per reply
'''),
]
_wrong = (lab_dir("lab-01") / "solution.py").read_text(encoding="utf-8")
for _old, _new in MISTAKE:
    assert _wrong.count(_old) == 1, f"the reference changed: update this variant ({_old.strip()[:40]})"
    _wrong = _wrong.replace(_old, _new)
exec(compile(_wrong, __file__, "exec"))
