"""Wrong on purpose: every lead byte accepts 80..BF next, so impossible starts are held.

Without the narrower second-byte ranges of E0, ED, F0 and F4, the bytes E0 9F (an
overlong form), ED A0 (a surrogate), F0 8F (overlong) and F4 90 (past U+10FFFF) wait
for bytes that can never make them a character. The output is still right in the end,
but late: U+FFFD that is already certain is held back. The reference with the table emptied.
"""

from instructor.variants import run_reference_with_mistake

MISTAKE = {
    '_SECOND_BYTE_RANGE.get(lead, (0x80, 0xBF))':
        '(0x80, 0xBF)',
}
run_reference_with_mistake('lab-03', MISTAKE, globals())

MUST_FAIL = [
    "test_second_byte_ranges_at_their_edges",
    "test_held_bytes_are_exactly_the_unfinished_character",
    "test_any_bytes_any_split_emits_exactly_what_is_certain",
]
MAY_COST = [2]
