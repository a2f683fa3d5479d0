"""Wrong on purpose: the first "</tool_call>" closes the block, even inside a JSON string."""

from typing import Any

from mini_vllm.labs import load_lab

_solution = load_lab("lab-01", "solution")
globals().update({name: value for name, value in vars(_solution).items() if not name.startswith("__")})

MUST_FAIL = ["test_find_end_tag_examples", "test_end_tag_inside_an_argument_does_not_close_the_call",
             "test_end_tag_split_inside_an_argument_string"]
MAY_COST = [2, 3, 4, 6]


def find_end_tag(body: str, state: Any = _solution.FRESH_SCAN) -> tuple[int | None, Any]:
    end = body.find(_solution.END_TAG)  # the mistake: ignores JSON strings
    if end != -1:
        return end, _solution.FRESH_SCAN
    # not there yet: keep a possible start of the tag for the next delta
    keep = next((n for n in range(min(len(body), len(_solution.END_TAG) - 1), 0, -1)
                 if _solution.END_TAG.startswith(body[-n:])), 0)
    return None, _solution.ScanState(len(body) - keep)


def parse_tool_calls(text: str) -> Any:
    parser = StreamingToolParser()
    first, last = parser.feed(text), parser.finish()
    return _solution.ParsedOutput(first.content + last.content, first.tool_calls + last.tool_calls)


class StreamingToolParser(_solution.StreamingToolParser):
    def _consume_block(self, text: str, out: Any) -> str | None:
        block = self._block
        window = block.unscanned + text
        end, scan = find_end_tag(window)
        if end is None:
            block.pieces.append(window[: scan.position])
            self._block = block._replace(unscanned=window[scan.position :])
            return None
        out.tool_calls.append(_solution.parse_call("".join(block.pieces) + window[:end]))
        self._block = None
        return window[end + len(_solution.END_TAG) :]
