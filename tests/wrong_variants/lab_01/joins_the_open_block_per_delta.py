"""Wrong on purpose: on every delta the open block is joined back into one string and handed whole to
find_end_tag (which resumes where it stopped, so the answers are right). Each delta then costs as
much as the call so far: quadratic inside one long argument. Only the count of characters sees it."""

from typing import Any

from mini_vllm.labs import load_lab

_solution = load_lab("lab-01", "solution")
globals().update({name: value for name, value in vars(_solution).items() if not name.startswith("__")})

MUST_FAIL = ["test_cost_per_character_is_constant_inside_one_long_argument"]
MAY_COST = [6]


class StreamingToolParser(_solution.StreamingToolParser):
    def _consume_block(self, text: str, out: Any) -> str | None:
        block = self._block
        done = sum(len(piece) for piece in block.pieces)
        body = "".join(block.pieces) + block.unscanned + text  # the mistake: the whole block, every delta
        end, scan = _solution.find_end_tag(body, block.scan._replace(position=done + block.scan.position))
        if end is None:
            cleared = body[done : scan.position]
            block.pieces.append(cleared)
            self._block = block._replace(unscanned=body[scan.position :], scan=scan._replace(position=0))
            self._stream(block.reader, cleared, out)
            return None
        call = _solution.parse_call(body[:end])
        self._stream(block.reader, body[done:end], out)
        out.tool_calls.append(call)
        self._block = None
        return body[end + len(_solution.END_TAG) :]
