"""Wrong on purpose: the U+FFFD of a character the prompt starts and the output breaks goes to the prompt.

``decode(prompt)`` already ends in a U+FFFD for the unfinished character, so it is tempting
to count it as the prompt's whenever the output's text starts with one too (that is what
``decode(prompt + output)[len(decode(prompt)):]`` does). But the output's bytes decided it:
prompt ``f0``, output ``9f 41`` is ``'\ufffdA'`` for the output, not ``'A'``; and a real U+FFFD
that the output completes (prompt ``ef bf``, output ``bd``) would vanish altogether.
"""

from mini_vllm.labs import load_lab

_solution = load_lab("lab-04", "solution")

MUST_FAIL = ["test_whose_character_at_the_prompt_end", "test_whose_character_on_a_real_vocabulary"]
MAY_COST = [4]


class IncrementalDetokenizer(_solution.IncrementalDetokenizer):
    def _prompt_chars(self, new_text: str, read: int) -> int:
        tail = self._decode(self.tokens[self._start : self._prompt_len])
        # The mistake: whatever the output's text shares with the prompt's own text is the prompt's.
        return max(super()._prompt_chars(new_text, read), _solution._shared_length(tail, new_text))
