"""Wrong on purpose: E0's second-byte range starts one too high, at A1 instead of A0.

An off-by-one at the edge of RFC 3629's table: U+0800 (E0 A0 80), the first three-byte
character, becomes two U+FFFD, because E0 A0 is judged an overlong start and released.
The reference with that one number changed.
"""

from instructor.variants import run_reference_with_mistake

MISTAKE = {
    '0xE0: (0xA0, 0xBF)':
        '0xE0: (0xA1, 0xBF)',
}
run_reference_with_mistake('lab-03', MISTAKE, globals())

MUST_FAIL = ["test_second_byte_ranges_at_their_edges"]
MAY_COST = [2]
