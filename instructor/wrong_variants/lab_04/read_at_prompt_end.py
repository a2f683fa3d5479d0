"""Wrong on purpose: the read offset starts at the prompt's end, wherever it is (pitfall: 🫨 lost or U+FFFD).

It is the reference with one change: ``__init__`` does not look back for the prompt's last
character boundary. A prompt that ends inside a character leaves the context cut through it,
so the character the reply completes is lost or shown as U+FFFD (byte tokens, prompt
F0 9F AB, reply A8 41: ``['', 'A']`` instead of ``['🫨', 'A']``).
"""

from mini_vllm.labs import load_lab

_solution = load_lab("lab-04", "solution")

MUST_FAIL = ["test_prompt_ending_mid_character", "test_any_bytes_any_prompt_end",
             "test_prompt_boundary_four_tokens_back"]
MAY_COST = [4]


class IncrementalDetokenizer(_solution.IncrementalDetokenizer):
    def _last_prompt_boundary(self, prompt_text: str) -> int:
        self._prompt_unfinished = False
        return self._prompt_len  # the mistake: the prompt's end is taken for a boundary
