"""Wrong on purpose: after a stop, feed returns "" before it looks at what it was given.

So ``feed(None)`` after the reply stopped is silently accepted: a caller with a bug
(a None chunk, bytes instead of text) learns nothing. Bad input gets a clear error
whenever it comes. The reference with the stopped check moved before the type check.
"""

from mini_vllm.labs import impl_path

_REFERENCE = impl_path("lab-05", "solution").read_text(encoding="utf-8")
_RIGHT = '''    def feed(self, text: str) -> str:
        if not isinstance(text, str):'''
_WRONG = '''    def feed(self, text: str) -> str:
        if self.stopped:
            return ""
        if not isinstance(text, str):'''
assert _RIGHT in _REFERENCE, "the reference changed: update this variant"
exec(compile(_REFERENCE.replace(_RIGHT, _WRONG), __file__, "exec"))

MUST_FAIL = ["test_bad_input_after_a_stop_still_raises"]
MAY_COST = [2]
