"""Wrong on purpose: holds everything from any "<" until a tag or the end, so "a < b" waits for nothing."""

from mini_vllm.labs import lab_dir

MUST_FAIL = ["test_false_alarms_are_released_as_soon_as_they_cannot_be_a_tag",
             "test_no_tag_ever_leaks_and_held_text_is_exactly_a_partial_tag"]
MAY_COST = [4]

# The reference solution with one mistake: each (old, new) pair replaces whole lines of it.
MISTAKE = [
    (r'''
            keep = next((n for n in range(min(len(START_TAG) - 1, len(window)), 0, -1)
                         if window.endswith(START_TAG[:n])), 0)
''', r'''
            keep = len(window) - window.find("<") if "<" in window else 0  # the mistake: any "<"
'''),
]
_wrong = (lab_dir("lab-01") / "solution.py").read_text(encoding="utf-8")
for _old, _new in MISTAKE:
    assert _wrong.count(_old) == 1, f"the reference changed: update this variant ({_old.strip()[:40]})"
    _wrong = _wrong.replace(_old, _new)
exec(compile(_wrong, __file__, "exec"))
