"""Wrong on purpose: E0's second-byte range starts one too high, at A1 instead of A0.

An off-by-one at the edge of RFC 3629's table: U+0800 (E0 A0 80), the first three-byte
character, becomes two U+FFFD, because E0 A0 is judged an overlong start and released.
The reference with that one number changed.
"""

from mini_vllm.labs import impl_path

_REFERENCE = impl_path("lab-03", "solution").read_text(encoding="utf-8")
_RIGHT, _WRONG = "0xE0: (0xA0, 0xBF)", "0xE0: (0xA1, 0xBF)"
assert _RIGHT in _REFERENCE, "the reference changed: update this variant"
exec(compile(_REFERENCE.replace(_RIGHT, _WRONG), __file__, "exec"))

MUST_FAIL = ["test_second_byte_ranges_at_their_edges"]
MAY_COST = [2]
