"""Wrong on purpose: decodes each token on its own instead of using the detokenizer labs."""

from typing import Any

from mini_vllm.labs import load_lab

_solution = load_lab("lab-02", "solution")
globals().update({name: value for name, value in vars(_solution).items() if not name.startswith("__")})

MUST_FAIL = ["test_pipeline_alone_reassembles_the_reply", "test_streamed_chat_reassembles_exactly"]
MAY_COST = [1]


class OutputPipeline(_solution.OutputPipeline):
    def __init__(self, tokenizer: Any, prompt_ids: Any, params: Any, parse_tool_calls: bool, **options: Any) -> None:
        super().__init__(tokenizer, prompt_ids, params, parse_tool_calls, **options)
        self._detokenize = lambda token_id: tokenizer.decode([token_id], skip_special_tokens=True)
        self._flush_text = lambda: ""
