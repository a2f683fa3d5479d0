"""Wrong on purpose: each block's new text goes to its CallReader at once, before the rest of the
delta is checked. When a later call in the same delta is malformed the feed is rolled back, but the
reader has already read call 0's closing text; when that text comes again it is skipped, and the
fragments lose a "}" (vLLM #22885)."""

from mini_vllm.labs import lab_dir

MUST_FAIL = ["test_a_failed_feed_does_not_lose_a_brace",
             "test_a_failed_feed_leaves_the_streamed_calls_as_they_were"]
MAY_COST = [6]

# The reference solution with one mistake: each (old, new) pair replaces whole lines of it.
MISTAKE = [
    (r'''
            to_read.append((self._reader, window[: scan.position]))
''', r'''
            if (progress := self._reader.feed(window[: scan.position])) is not None:  # the mistake: read now,
                out.tool_call_deltas.append(progress)  # even if a later call in this delta turns out malformed
'''),
]
_wrong = (lab_dir("lab-01") / "solution.py").read_text(encoding="utf-8")
for _old, _new in MISTAKE:
    assert _wrong.count(_old) == 1, f"the reference changed: update this variant ({_old.strip()[:40]})"
    _wrong = _wrong.replace(_old, _new)
exec(compile(_wrong, __file__, "exec"))
