"""Wrong on purpose: the first "</tool_call>" closes the block, even inside a JSON string."""

from mini_vllm.labs import lab_dir

MUST_FAIL = ["test_find_end_tag_examples",
             "test_end_tag_inside_an_argument_does_not_close_the_call",
             "test_end_tag_split_inside_an_argument_string"]
MAY_COST = [2, 3, 4, 6]

# The reference solution with one mistake: each (old, new) pair replaces whole lines of it.
MISTAKE = [
    (r'''
        elif char == '"':
            in_string = True
        elif char == "<":
''', r'''
        elif char == '"':
            pass  # the mistake: a quote is just a character, so strings are never seen
        elif char == "<":
'''),
]
_wrong = (lab_dir("lab-01") / "solution.py").read_text(encoding="utf-8")
for _old, _new in MISTAKE:
    assert _wrong.count(_old) == 1, f"the reference changed: update this variant ({_old.strip()[:40]})"
    _wrong = _wrong.replace(_old, _new)
exec(compile(_wrong, __file__, "exec"))
