"""Wrong on purpose: shows prose at once, even a suffix that is the start of "<tool_call>"."""

from mini_vllm.labs import lab_dir

MUST_FAIL = ["test_a_partial_tag_is_held_not_leaked",
             "test_streaming_equals_batch_for_any_chunking",
             "test_no_tag_ever_leaks_and_held_text_is_exactly_a_partial_tag",
             "test_fifty_random_slicings"]
MAY_COST = [4, 6]

# The reference solution with one mistake: each (old, new) pair replaces whole lines of it.
MISTAKE = [
    (r'''
            keep = next((n for n in range(min(len(START_TAG) - 1, len(window)), 0, -1)
                         if window.endswith(START_TAG[:n])), 0)
''', r'''
            keep = 0  # the mistake: no hold-back
'''),
]
_wrong = (lab_dir("lab-01") / "solution.py").read_text(encoding="utf-8")
for _old, _new in MISTAKE:
    assert _wrong.count(_old) == 1, f"the reference changed: update this variant ({_old.strip()[:40]})"
    _wrong = _wrong.replace(_old, _new)
exec(compile(_wrong, __file__, "exec"))
