"""Wrong on purpose: a class of code points lifted by truncating each code point to one byte.

ASCII classes come out right, so JSON's punctuation works; `[一-龥]` becomes a range of
single bytes, and no CJK character can be written (the shape of xgrammar #491).
"""

from mini_vllm.labs import load_lab

_solution = load_lab("lab-08", "solution")
globals().update({name: getattr(_solution, name) for name in _solution.__all__})

MUST_FAIL = ["test_class_lifts_to_its_utf8_ranges", "test_any_ranges_lift_exactly"]
MAY_COST = [1]


def lift_to_bytes(chars):  # type: ignore[no-untyped-def]
    table = [[DEAD] * 256 for _ in range(chars.num_states)]  # noqa: F821
    accepting = [s in chars.accepting for s in range(chars.num_states)]
    for state, moves in enumerate(chars.transitions):
        for lo, hi, target in moves:
            first, last = lo & 0xFF, hi & 0xFF
            if hi - lo >= 0xFF or first > last:
                first, last = 0, 0xFF
            for byte in range(first, last + 1):
                table[state][byte] = target
    return ByteAutomaton(start=chars.start, accepting=accepting, table=table)  # noqa: F821
