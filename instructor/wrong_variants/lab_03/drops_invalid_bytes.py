"""Wrong on purpose: decodes with errors="ignore", so invalid bytes vanish instead of showing U+FFFD."""

from mini_vllm.labs import load_lab

_solution = load_lab("lab-03", "solution")
utf8_expected_len = _solution.utf8_expected_len
_unfinished_tail_len = _solution._unfinished_tail_len

MUST_FAIL = [
    "test_invalid_bytes_decode_like_the_standard_library",
    "test_any_bytes_any_split_emits_exactly_what_is_certain",
    "test_flush_handles_truncated_sequence",
    "test_flush_releases_the_held_bytes_as_text",
]
MAY_COST = [2, 3]


class StreamingDetokenizer(_solution.StreamingDetokenizer):
    def feed(self, token_id: int) -> str:
        token_bytes = self.tokenizer.decode_single_token_bytes(token_id)
        if token_id in self._special_ids:
            return ""
        data = self.held_bytes + token_bytes
        ready = len(data) - _unfinished_tail_len(data)
        self.held_bytes = data[ready:]
        return data[:ready].decode("utf-8", errors="ignore")

    def flush(self) -> str:
        text = self.held_bytes.decode("utf-8", errors="ignore")
        self.held_bytes = b""
        return text
