"""Wrong on purpose: no role in the first chunk, a chunk for every step (empty or not), ASCII-escaped arguments."""

import json
from typing import Any

from mini_vllm.labs import load_lab

_solution = load_lab("lab-02", "solution")
globals().update({name: value for name, value in vars(_solution).items() if not name.startswith("__")})

MUST_FAIL = ["test_sse_framing_and_the_first_chunk", "test_no_empty_content_deltas"]
MAY_COST = [3]


class ChunkFormatter(_solution.ChunkFormatter):
    def chunks(self, out: Any) -> list[dict[str, Any]]:
        if self.kind == "completion":
            return super().chunks(out)
        delta: dict[str, Any] = {"content": out.text}
        if out.tool_calls:
            delta["tool_calls"] = [
                {"index": i, "id": f"call_{i}", "type": "function",
                 "function": {"name": c.name, "arguments": json.dumps(c.arguments)}}  # ensure_ascii=True
                for i, c in enumerate(out.tool_calls)]
        return [self._chunk(self._choice({"delta": delta}, out.finish_reason, out.stop_reason))]
