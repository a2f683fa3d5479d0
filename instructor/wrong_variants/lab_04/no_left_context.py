"""Wrong on purpose: decodes the pending tokens with no context before them.

Byte-level tokenizers do not notice: their ``decode`` is a join of bytes. On a
SentencePiece-style family it loses spaces: ``decode([▁This])`` is ``"This"``, because the
decoder strips the first space of whatever string it decodes, so "This This" streams as
"ThisThis".
"""

from mini_vllm.labs import load_lab

_solution = load_lab("lab-04", "solution")

MUST_FAIL = ["test_leading_spaces_survive_on_spm"]
MAY_COST = [1]


class IncrementalDetokenizer(_solution.IncrementalDetokenizer):
    def _show_through(self, read: int, text: str) -> str:
        new_text = super()._show_through(read, text)
        # The mistake: the context always starts where the pending tokens start.
        self._set_prefix(self._read, "")
        return new_text
