"""Wrong on purpose: the reader looks the name up with a regular expression over the whole call
received so far, on every delta. Its answers are right, but before the name has arrived (arguments
written first) each delta scans the whole call again: quadratic. Only the count of scanned
characters sees it."""

import re

from mini_vllm.labs import lab_dir

MUST_FAIL = ["test_cost_per_character_is_constant_inside_one_long_argument"]
MAY_COST = [6]
_NAME = re.compile(r'"name"\s*:\s*"((?:[^"\\]|\\.)*)"')  # the name's string, escapes and all

# The reference solution with one mistake: each (old, new) pair replaces whole lines of it.
MISTAKE = [
    (r'''
        self.held += [char for char in text if self._read(char)]  # each character once
''', r'''
        self.body = getattr(self, "body", "") + text
        found = _NAME.search(self.body)  # the mistake: the whole call so far, on every delta
        self.held += [char for char in text if self._read(char)]
        self.name = json.loads('"' + found.group(1) + '"') if found else None
'''),
]
_wrong = (lab_dir("lab-01") / "solution.py").read_text(encoding="utf-8")
for _old, _new in MISTAKE:
    assert _wrong.count(_old) == 1, f"the reference changed: update this variant ({_old.strip()[:40]})"
    _wrong = _wrong.replace(_old, _new)
exec(compile(_wrong, __file__, "exec"))
