"""Wrong on purpose: the fallback looks back over 2 tokens only (pitfall: a 3-token character never fits).

It is the reference with one change: when the decoded text ends in U+FFFD, the search for a
proven boundary tries the last 2 token positions instead of 3. A character can span 3 tokens
(a U+FFFD the model wrote, spelled as three byte tokens EF BF BD, for one), and the boundary
in front of it is never found: a run of them is held, and re-decoded, until the stream ends.
(The lesson's first draft made the same mistake with a 2-token window-diff.)
"""

from functools import partial

from mini_vllm.labs import load_lab
from mini_vllm.tokenizer_base import REPLACEMENT_CHAR

_solution = load_lab("lab-04", "solution")

MUST_FAIL = ["test_a_run_of_real_replacement_chars_is_shown_promptly", "test_cost_per_token_is_bounded"]
MAY_COST = [2]
_TOO_FEW_TOKENS = 2  # the mistake: an unfinished character may span 3


class IncrementalDetokenizer(_solution.IncrementalDetokenizer):
    def push(self, token_id: int) -> str:
        text = self._decode([*self.tokens[self._prefix :], token_id])
        self.tokens.append(token_id)
        end = len(self.tokens)
        self._texts[end] = text
        if not text.endswith(REPLACEMENT_CHAR):
            return self._show_through(end, text)
        for position in range(end - 1, max(self._read, end - 1 - _TOO_FEW_TOKENS), -1):
            left = partial(self._text_to, position)
            if self._proven_boundary(position, text, left, left_may_be_clean=position <= self._prompt_len):
                return self._show_through(position, left())
        return ""
