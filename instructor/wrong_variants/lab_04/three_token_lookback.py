"""Wrong on purpose: the prompt's last boundary is looked for over three tokens only.

The reasoning a student writes: "an unfinished character is at most three bytes, so it spans
at most three tokens: if no boundary shows up among them, the prompt's end must be one". But a
token can end one character and start the next: the shipped BPE has ``8d f0 9f`` (the end of 不
and the start of 🫨), and after ``e4 | b8 | 8d f0 9f | ab`` the last boundary is four tokens back.
Reading from the prompt's end, the context ends in half an emoji, and 🫨 is lost (the lesson's trap).
"""

from mini_vllm.labs import load_lab
from mini_vllm.tokenizers.base import REPLACEMENT_CHAR

_solution = load_lab("lab-04", "solution")

MUST_FAIL = ["test_prompt_boundary_four_tokens_back"]
MAY_COST = [4]


class IncrementalDetokenizer(_solution.IncrementalDetokenizer):
    def _last_prompt_boundary(self, prompt_text: str) -> int:
        last, rights = self._prompt_len, {}
        for position in range(last - 1, max(0, last - 3), -1):
            before = self._text_to(position)
            if (before and not before.endswith(REPLACEMENT_CHAR)) or self._is_boundary(position, last, prompt_text,
                                                                                       rights):
                return position
        self._prompt_unfinished = False
        return last  # the mistake: nothing found within three tokens, so the prompt's end is taken for a boundary
