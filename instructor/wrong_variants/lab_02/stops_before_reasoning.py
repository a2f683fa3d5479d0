"""Wrong on purpose: the stop strings run before the reasoning parser, on the thought too.

A stop word the model merely thinks about ends the reply before the answer begins
(vLLM #53066): the user gets half a thought and no answer.
"""

from mini_vllm.labs import load_lab

_solution = load_lab("lab-02", "solution")
globals().update({name: value for name, value in vars(_solution).items() if not name.startswith("__")})

MUST_FAIL = ["test_pipeline_alone_keeps_stop_strings_out_of_the_thought", "test_stop_string_cuts_only_the_answer"]
MAY_COST = [4]


class OutputPipeline(_solution.OutputPipeline):
    def _after_detokenizer(self, text: str) -> _solution.StepOutput:
        reasoning, answer = self._split_reasoning(self._stops.feed(text))
        out = self._route(answer)
        out.reasoning = reasoning
        return out
