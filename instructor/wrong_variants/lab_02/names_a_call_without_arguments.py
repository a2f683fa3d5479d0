"""Wrong on purpose: a call's first entry leaves out function.arguments when no fragment came with the
name (OpenAI's first entry carries "arguments": "" then)."""

from typing import Any

from mini_vllm.labs import load_lab

_solution = load_lab("lab-02", "solution")
globals().update({name: value for name, value in vars(_solution).items() if not name.startswith("__")})

MUST_FAIL = ["test_a_call_entry_names_the_call_and_opens_its_arguments"]
MAY_COST = [3]


class ChunkFormatter(_solution.ChunkFormatter):
    def _tool_call_entry(self, delta: Any) -> dict[str, Any]:
        entry = super()._tool_call_entry(delta)
        if delta.name is not None and not delta.arguments_fragment:
            del entry["function"]["arguments"]  # the mistake: no arguments key until there is a fragment
        return entry
