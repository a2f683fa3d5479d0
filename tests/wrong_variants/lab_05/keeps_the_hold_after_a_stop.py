"""Wrong on purpose: a stop that completes across chunks leaves its first half held.

After "done EN" the checker holds "EN"; "D" completes "END" and the reply stops, but
``held_text`` still says "EN", so a flush at the end would show part of the stop string.
The reference without the line that clears the hold at a stop.
"""

from mini_vllm.labs import impl_path

_REFERENCE = impl_path("lab-05", "solution").read_text(encoding="utf-8")
_RIGHT = '            self.held_text = self._tail = ""\n'
assert _RIGHT in _REFERENCE, "the reference changed: update this variant"
exec(compile(_REFERENCE.replace(_RIGHT, ""), __file__, "exec"))

MUST_FAIL = ["test_a_stop_ends_the_reply_and_nothing_stays_held"]
MAY_COST = [2]
