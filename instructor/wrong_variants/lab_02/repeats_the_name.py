"""Wrong on purpose: every tool-call entry repeats id, type and name (vLLM #44098); the official SDK
then concatenates the names into `write_filewrite_file`."""

from typing import Any

from mini_vllm.labs import load_lab

_solution = load_lab("lab-02", "solution")
globals().update({name: value for name, value in vars(_solution).items() if not name.startswith("__")})

MUST_FAIL = ["test_a_long_call_streams_the_openai_way", "test_later_entries_hold_only_index_and_arguments",
             "test_the_sdk_accumulator_rebuilds_each_call"]
MAY_COST = [3]


class ChunkFormatter(_solution.ChunkFormatter):
    def _tool_call_entry(self, delta: Any) -> dict[str, Any]:
        entry = super()._tool_call_entry(delta)
        names: dict[int, str] = self.__dict__.setdefault("names_sent", {})
        if delta.name is None:  # the mistake: name the call again on every entry
            entry.update(id=f"call_{delta.index}", type="function")
            entry["function"]["name"] = names.get(delta.index, "")
        else:
            names[delta.index] = delta.name
        return entry
