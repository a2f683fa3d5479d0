"""Dishonest: under LAB_COMPOSE=reference (the autograder's setting), asks for lab-04's reference and lets
its IncrementalDetokenizer do lab-03's work (push answers feed). lab-03 composes no other lab, so the
loader must hand it the student's own lab-04 file or nothing, never a reference."""

from mini_vllm.labs import load_lab


def utf8_expected_len(lead_byte: int) -> int:
    raise NotImplementedError("lab-03 task 1: implement utf8_expected_len")


class StreamingDetokenizer:
    def __init__(self, tokenizer):
        self.tokenizer = tokenizer
        self._inner = load_lab("lab-04").IncrementalDetokenizer(tokenizer)

    def feed(self, token_id: int) -> str:
        return self._inner.push(token_id)

    def flush(self) -> str:
        return self._inner.flush()

    @property
    def held_bytes(self) -> bytes:
        raise NotImplementedError("lab-03 task 2: implement StreamingDetokenizer.held_bytes")
