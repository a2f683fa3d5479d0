"""Wrong on purpose: keeps the whole reply and splits all of it again on every chunk.

Always right, and O(length of the reply) per chunk: a long thought makes every new
character slower than the last.
"""

from mini_vllm.labs import load_lab

_solution = load_lab("lab-06", "solution")
globals().update({name: value for name, value in vars(_solution).items() if not name.startswith("__")})

MUST_FAIL = ["test_cost_per_character_does_not_grow"]
MAY_COST = [2]


class StreamingReasoningParser(_solution.StreamingReasoningParser):
    def __init__(self, starts_in_reasoning: bool = False,
                 implicit_end_tags: tuple[str, ...] = ("<tool_call>",)) -> None:
        super().__init__(starts_in_reasoning, implicit_end_tags)
        self._options = (starts_in_reasoning, implicit_end_tags)
        self._seen = ""
        self._shown = ("", "")

    def feed(self, text: str) -> object:
        if not isinstance(text, str) or self._finished:
            return super().feed(text)
        self._seen += text
        fresh = _solution.StreamingReasoningParser(*self._options)
        fresh.feed(self._seen)  # the whole reply so far, from the start
        decided = self._seen[: len(self._seen) - len(fresh.held_text)]
        reasoning, content = _solution.split_reasoning(decided, *self._options)
        out = _solution.ReasoningDelta(reasoning[len(self._shown[0]) :], content[len(self._shown[1]) :])
        self._shown = (reasoning, content)
        self.held_text, self.in_reasoning, self._mode = fresh.held_text, fresh.in_reasoning, fresh._mode
        return out
