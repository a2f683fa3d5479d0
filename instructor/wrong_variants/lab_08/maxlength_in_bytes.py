"""Wrong on purpose: each byte of a character takes a step of the character automaton.

Every byte from 80 to F4 is read as if it were one whole character of the class, the way
a grammar that treats UTF-8 as Latin-1 does (xgrammar #418). So `"maxLength": 8` runs out
after 8 bytes: two CJK characters and a bit.
"""

from mini_vllm.labs import load_lab

_solution = load_lab("lab-08", "solution")
globals().update({name: getattr(_solution, name) for name in _solution.__all__})

MUST_FAIL = ["test_max_length_counts_characters_not_bytes", "test_schema_automaton_lifts_to_the_same_language"]
MAY_COST = [1]


def lift_to_bytes(chars):  # type: ignore[no-untyped-def]
    table = [[DEAD] * 256 for _ in range(chars.num_states)]  # noqa: F821  (DEAD comes from the solution)
    accepting = [s in chars.accepting for s in range(chars.num_states)]
    for state, moves in enumerate(chars.transitions):
        for lo, hi, target in moves:
            for byte in range(min(lo, 0x80), 0xF5):
                if lo <= byte <= hi or (byte >= 0x80 and hi >= 0x80):
                    table[state][byte] = target
    return ByteAutomaton(start=chars.start, accepting=accepting, table=table)  # noqa: F821
