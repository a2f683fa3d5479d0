"""Wrong on purpose: on every delta the open block is joined back into one string and handed whole to
find_end_tag (which resumes where it stopped, so the answers are right). Each delta then costs as
much as the call so far: quadratic inside one long argument. Only the count of characters sees it."""

from mini_vllm.labs import lab_dir

MUST_FAIL = ["test_cost_per_character_is_constant_inside_one_long_argument"]
MAY_COST = [6]

# The reference solution with one mistake: each (old, new) pair replaces whole lines of it.
MISTAKE = [
    (r'''
        window = self._unscanned + text
        end, scan = find_end_tag(window, self._scan)
''', r'''
        done = sum(map(len, self._pieces))
        body = "".join(self._pieces) + self._unscanned + text  # the mistake: the whole block, every delta
        end, scan = find_end_tag(body, self._scan._replace(position=done + self._scan.position))
        window, scan = body[done:], scan._replace(position=scan.position - done)
        end = None if end is None else end - done
'''),
]
_wrong = (lab_dir("lab-01") / "solution.py").read_text(encoding="utf-8")
for _old, _new in MISTAKE:
    assert _wrong.count(_old) == 1, f"the reference changed: update this variant ({_old.strip()[:40]})"
    _wrong = _wrong.replace(_old, _new)
exec(compile(_wrong, __file__, "exec"))
