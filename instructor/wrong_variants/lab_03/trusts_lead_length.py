"""Wrong on purpose: holds as many bytes as the lead byte announces, without checking them.

A forward scan that steps by each lead's length treats `C3 F0` as one (broken) 2-byte
character and then misreads the emoji that follows: `C3 F0 9F 99 82` must decode to
"\\ufffd🙂", not to five replacement characters.
"""

from mini_vllm.labs import load_lab

_solution = load_lab("lab-03", "solution")
utf8_expected_len = _solution.utf8_expected_len

MUST_FAIL = [
    "test_invalid_bytes_decode_like_the_standard_library",
    "test_any_bytes_any_split_emits_exactly_what_is_certain",
    "test_fifty_random_slicings",
]
MAY_COST = [2]


class StreamingDetokenizer(_solution.StreamingDetokenizer):
    def feed(self, token_id: int) -> str:
        token_bytes = self.tokenizer.decode_single_token_bytes(token_id)
        if token_id in self._special_ids:
            return ""
        data = self.held_bytes + token_bytes
        out, i = [], 0
        while i < len(data):
            need = max(1, utf8_expected_len(data[i]))
            if i + need > len(data):
                break  # wait for the rest of this "character"
            out.append(data[i : i + need].decode("utf-8", errors="replace"))
            i += need
        self.held_bytes = data[i:]
        return "".join(out)
