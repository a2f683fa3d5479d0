"""Wrong on purpose: the last step's text and the finish reason go out in one chunk, so the last chunk's
delta is not empty (the README: the last chunk has an empty delta and the finish reason)."""

from typing import Any

from mini_vllm.labs import load_lab

_solution = load_lab("lab-02", "solution")
globals().update({name: value for name, value in vars(_solution).items() if not name.startswith("__")})

MUST_FAIL = ["test_the_last_chunk_has_an_empty_delta_and_the_finish_reason"]
MAY_COST = [3]


class ChunkFormatter(_solution.ChunkFormatter):
    def chunks(self, out: Any) -> list[dict[str, Any]]:
        chunks = super().chunks(out)
        if self.kind == "chat" and out.finish_reason and len(chunks) > 1:  # the mistake: fold the finish into the text
            last = chunks.pop()["choices"][0]
            chunks[-1]["choices"][0].update(finish_reason=last["finish_reason"], stop_reason=last["stop_reason"])
        return chunks
