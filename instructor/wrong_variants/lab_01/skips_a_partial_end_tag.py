"""Wrong on purpose: when the body ends in what may be the start of the end tag ("</tool_"),
find_end_tag returns a state past it instead of stopping at its "<". Resumed on the grown body,
the scan starts after the "<" and never sees the tag: a block cut inside its end tag never closes."""

from mini_vllm.labs import lab_dir

MUST_FAIL = ["test_find_end_tag_stops_at_a_possible_start_of_the_tag"]
MAY_COST = [2, 4, 5, 6]

# The reference solution with one mistake: each (old, new) pair replaces whole lines of it.
MISTAKE = [
    (r'''
            if END_TAG.startswith(candidate):
                break  # the body ends in what may be the start of the end tag: wait for more
''', r'''
            if END_TAG.startswith(candidate):
                position = len(body)  # the mistake: the state resumes past the "<"
                break
'''),
]
_wrong = (lab_dir("lab-01") / "solution.py").read_text(encoding="utf-8")
for _old, _new in MISTAKE:
    assert _wrong.count(_old) == 1, f"the reference changed: update this variant ({_old.strip()[:40]})"
    _wrong = _wrong.replace(_old, _new)
exec(compile(_wrong, __file__, "exec"))
