"""Wrong on purpose: the answer goes through the tool parser first and only its prose through the stop
strings, so a stop string the model writes inside a call's arguments never ends the reply (vLLM's
stop strings see the model's text before any tool parser)."""

from typing import Any

from mini_vllm.labs import load_lab
from mini_vllm.labtypes.lab02 import StepOutput

_solution = load_lab("lab-02", "solution")
globals().update({name: value for name, value in vars(_solution).items() if not name.startswith("__")})

MUST_FAIL = ["test_a_stop_string_inside_a_call_ends_the_reply", "test_max_tokens_inside_a_call"]
MAY_COST = [1, 2]  # the order of the stages: built and run in push (task 1), flushed in finish (task 2)


class OutputPipeline(_solution.OutputPipeline):
    def _after_detokenizer(self, text: str) -> Any:
        reasoning, answer = self._split_reasoning(text)
        if self._tool_parser is None or not answer:
            out = StepOutput(self._stops.feed(answer))
        else:  # the mistake: the tool parser first, the stop strings on its prose only
            out = self._add(StepOutput(), self._tool_parser.feed(answer))
            out.text = self._stops.feed(out.text)
        out.reasoning = reasoning
        return out
