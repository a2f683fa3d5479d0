"""Wrong on purpose: a stop that completes across chunks leaves its first half held.

After "done EN" the checker holds "EN"; "D" completes "END" and the reply stops, but
``held_text`` still says "EN", so a flush at the end would show part of the stop string.
The reference without the line that clears the hold at a stop.
"""

from instructor.variants import run_reference_with_mistake

MISTAKE = {
    '            self.held_text = ""\n':
        '',
}
run_reference_with_mistake('lab-05', MISTAKE, globals())

MUST_FAIL = ["test_a_stop_ends_the_reply_and_nothing_stays_held"]
MAY_COST = [2]
