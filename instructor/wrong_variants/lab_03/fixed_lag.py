"""Wrong on purpose: always holds back the last three bytes, "just in case".

Never broken, always late: ASCII text lags three characters behind the model.
"""

from mini_vllm.labs import load_lab

_solution = load_lab("lab-03", "solution")
utf8_expected_len = _solution.utf8_expected_len

MUST_FAIL = [
    "test_ascii_streams_one_char_per_token",
    "test_each_character_emitted_at_the_token_that_completes_it",
    "test_held_bytes_are_exactly_the_unfinished_character",
]
MAY_COST = [2]


class StreamingDetokenizer(_solution.StreamingDetokenizer):
    def feed(self, token_id: int) -> str:
        token_bytes = self.tokenizer.decode_single_token_bytes(token_id)
        if token_id in self._special_ids:
            return ""
        data = self.held_bytes + token_bytes
        ready = max(0, len(data) - 3)
        # back up so the cut never splits a character (the lag is the only mistake)
        while 0 < ready < len(data) and 0x80 <= data[ready] <= 0xBF:
            ready -= 1
        self.held_bytes = data[ready:]
        return data[:ready].decode("utf-8", errors="replace")
