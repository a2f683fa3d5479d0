"""Wrong on purpose: the fallback looks for a boundary over the last 2 tokens only.

It is the reference with one change: when the decoded text ends in U+FFFD, the search for a
proven boundary tries the last 2 token positions (end-1, end-2) instead of those at least
three tokens back. Every proof it uses is sound, so the text stays right, but the one proof
that needs three tokens after it (every seam adds up) never applies: a run of one-token
U+FFFD (a real vocabulary piece, in Mistral's and in a test's vocabulary) is held and
re-decoded, growing with the stream.
"""

from mini_vllm.labs import load_lab
from mini_vllm.tokenizers.base import REPLACEMENT_CHAR

_solution = load_lab("lab-04", "solution")

MUST_FAIL = ["test_a_run_of_real_replacement_chars_is_shown_promptly", "test_cost_per_token_is_bounded"]
MAY_COST = [2]


class IncrementalDetokenizer(_solution.IncrementalDetokenizer):
    def push(self, token_id: int) -> str:
        ids = self.tokens[self._prefix :]
        ids.append(token_id)
        text = self._decode(ids)
        self.tokens.append(token_id)
        end = len(self.tokens)
        if not text.endswith(REPLACEMENT_CHAR):
            return self._show_through(end, text)
        self._texts[end] = text
        rights: dict[int, str] = {}
        for position in range(end - 1, max(self._read, self._prompt_len, end - 3), -1):  # the mistake: 2 tokens
            if self._is_boundary(position, end, text, rights):
                return self._show_through(position, self._text_to(position))
        return ""
