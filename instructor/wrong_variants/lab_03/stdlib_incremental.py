"""Wrong on purpose: wraps Python's incremental UTF-8 decoder, which holds a surrogate start.

Almost right, and a plausible shortcut: CPython's decoder waits for the third byte of
``ED A0..BF`` (its surrogatepass handler needs it), although those bytes can never
become a character. So U+FFFD that is already certain shows one token late.
"""

import codecs

from mini_vllm.labs import load_lab

_solution = load_lab("lab-03", "solution")
utf8_expected_len = _solution.utf8_expected_len

MUST_FAIL = ["test_held_bytes_are_exactly_the_unfinished_character",
             "test_any_bytes_any_split_emits_exactly_what_is_certain"]
MAY_COST = [2]


class StreamingDetokenizer(_solution.StreamingDetokenizer):
    def __init__(self, tokenizer: object) -> None:
        super().__init__(tokenizer)  # type: ignore[arg-type]
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")

    @property  # type: ignore[override]
    def held_bytes(self) -> bytes:
        return self._decoder.getstate()[0]

    @held_bytes.setter
    def held_bytes(self, value: bytes) -> None:  # the parent's __init__ and flush assign it
        pass

    def feed(self, token_id: int) -> str:
        token_bytes = self.tokenizer.decode_single_token_bytes(token_id)
        if token_id in self._special_ids:
            return ""
        return self._decoder.decode(token_bytes)

    def flush(self) -> str:
        return self._decoder.decode(b"", final=True)
