"""Wrong on purpose: whatever arrives in the same delta after a call's end tag is thrown away."""

from mini_vllm.labs import lab_dir

MUST_FAIL = ["test_prose_arriving_with_an_end_tag_is_kept",
             "test_streaming_equals_batch_for_any_chunking",
             "test_fifty_random_slicings"]
MAY_COST = [4, 6]

# The reference solution with one mistake: each (old, new) pair replaces whole lines of it.
MISTAKE = [
    (r'''
        return None if end is None else window[end + len(END_TAG) :]
''', r'''
        return None if end is None else ""  # the mistake: the rest of the delta is lost
'''),
]
_wrong = (lab_dir("lab-01") / "solution.py").read_text(encoding="utf-8")
for _old, _new in MISTAKE:
    assert _wrong.count(_old) == 1, f"the reference changed: update this variant ({_old.strip()[:40]})"
    _wrong = _wrong.replace(_old, _new)
exec(compile(_wrong, __file__, "exec"))
