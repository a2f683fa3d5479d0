"""Wrong on purpose: feed refuses everything after finish() before it looks at what it got.

`feed(None)` after the end raises RuntimeError ("the reply is over") instead of naming the
bad input: bad input gets a TypeError that says what was wrong, whenever it comes. The
reference with its two checks in the other order.
"""

from mini_vllm.labs import impl_path

_REFERENCE = impl_path("lab-06", "solution").read_text(encoding="utf-8")
_RIGHT, _WRONG = '''        if not isinstance(text, str):
            raise TypeError(f"feed() takes the next text chunk as a str, got {type(text).__name__}")
        if self._finished:
            raise RuntimeError("feed() after finish(): this reply is over")''', '''        if self._finished:
            raise RuntimeError("feed() after finish(): this reply is over")
        if not isinstance(text, str):
            raise TypeError(f"feed() takes the next text chunk as a str, got {type(text).__name__}")'''
assert _REFERENCE.count(_RIGHT) == 1, "the reference changed: update this variant"
exec(compile(_REFERENCE.replace(_RIGHT, _WRONG), __file__, "exec"))

MUST_FAIL = ["test_bad_input_after_finish_is_still_named"]
MAY_COST = [2]
