"""Wrong on purpose: decodes each token alone, the bug lab-03 exists to fix."""

from mini_vllm.labs import load_lab

_solution = load_lab("lab-03", "solution")
utf8_expected_len = _solution.utf8_expected_len

MUST_FAIL = [
    "test_emoji_is_held_until_complete",
    "test_never_emits_replacement_chars_for_valid_text",
    "test_each_character_emitted_at_the_token_that_completes_it",
    "test_any_bytes_any_split_emits_exactly_what_is_certain",
    "test_fifty_random_slicings",
]
MAY_COST = [2]


class StreamingDetokenizer(_solution.StreamingDetokenizer):
    def feed(self, token_id: int) -> str:
        if token_id in self._special_ids:
            return ""
        return self.tokenizer.decode([token_id])
