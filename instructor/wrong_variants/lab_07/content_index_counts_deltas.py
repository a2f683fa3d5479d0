"""Wrong on purpose (vLLM #35184): content_index goes up with every delta instead of naming the part."""

from typing import Any

from mini_vllm.labs import load_lab

_solution = load_lab("lab-07", "solution")
globals().update({name: value for name, value in vars(_solution).items() if not name.startswith("__")})

MUST_FAIL = ["test_content_index_is_the_part_index", "test_items_follow_the_grammar_for_every_reply",
             "test_the_openai_sdk_rebuilds_your_message"]
MAY_COST = [1]


class ResponsesEventFormatter(_solution.ResponsesEventFormatter):
    def _emit(self, type: str, **fields: Any) -> dict[str, Any]:
        if type.endswith("_text.delta"):
            self._deltas = getattr(self, "_deltas", -1) + 1
            fields["content_index"] = self._deltas
        return super()._emit(type, **fields)
