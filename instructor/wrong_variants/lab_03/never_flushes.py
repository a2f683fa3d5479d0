"""Wrong on purpose: a cut-off character at the end of the stream silently disappears."""

from mini_vllm.labs import load_lab

_solution = load_lab("lab-03", "solution")
utf8_expected_len = _solution.utf8_expected_len

MUST_FAIL = [
    "test_flush_handles_truncated_sequence",
    "test_flush_releases_the_held_bytes_as_text",
]
MAY_COST = [3]


class StreamingDetokenizer(_solution.StreamingDetokenizer):
    def flush(self) -> str:
        self.held_bytes = b""
        return ""
