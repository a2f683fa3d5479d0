"""Wrong on purpose: plain json.loads, which keeps the last of two equal keys. The stream has already
sent the first (`12` for `"arguments": 12, "arguments": {...}`), so streamed and whole disagree."""

from mini_vllm.labs import lab_dir

MUST_FAIL = ["test_a_repeated_key_is_refused",
             "test_a_repeated_key_streams_but_the_call_is_refused"]
MAY_COST = [1, 3, 6]

# The reference solution with one mistake: each (old, new) pair replaces whole lines of it.
MISTAKE = [
    (r'''
        payload = json.loads(raw, object_pairs_hook=_refuse_repeated_keys)
''', r'''
        payload = json.loads(raw)  # the mistake: a repeated key is accepted, the last one wins
'''),
]
_wrong = (lab_dir("lab-01") / "solution.py").read_text(encoding="utf-8")
for _old, _new in MISTAKE:
    assert _wrong.count(_old) == 1, f"the reference changed: update this variant ({_old.strip()[:40]})"
    _wrong = _wrong.replace(_old, _new)
exec(compile(_wrong, __file__, "exec"))
