"""Wrong on purpose: the first "</tool_call>" closes the block, even inside a JSON string."""

from typing import Any

from mini_vllm.labs import load_lab

_solution = load_lab("lab-01", "solution")
globals().update({name: value for name, value in vars(_solution).items() if not name.startswith("__")})

MUST_FAIL = ["test_find_end_tag_examples", "test_end_tag_inside_an_argument_does_not_close_the_call",
             "test_end_tag_split_inside_an_argument_string"]
MAY_COST = [2, 3, 4]


def find_end_tag(body: str, state: Any = _solution.FRESH_SCAN) -> tuple[int | None, Any]:
    end = body.find(_solution.END_TAG)  # the mistake: ignores JSON strings
    return (None if end == -1 else end), _solution.FRESH_SCAN


def parse_tool_calls(text: str) -> Any:
    parser = StreamingToolParser()
    first, last = parser.feed(text), parser.finish()
    return _solution.ParsedOutput(first.content + last.content, first.tool_calls + last.tool_calls)


class StreamingToolParser(_solution.StreamingToolParser):
    def _consume_block(self, text: str, out: Any) -> str | None:
        self._block += text
        end, _ = find_end_tag(self._block)
        if end is None:
            return None
        out.tool_calls.append(_solution.parse_call(self._block[:end]))
        rest, self._block = self._block[end + len(_solution.END_TAG) :], None
        return rest
