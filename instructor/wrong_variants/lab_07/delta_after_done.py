"""Wrong on purpose: takes a step for a whole text, and closes the text with .done after every step.

The next step's delta then arrives after its .done: the client already holds a "final" text that is not.
"""

from typing import Any

from mini_vllm.labs import load_lab

_solution = load_lab("lab-07", "solution")
globals().update({name: value for name, value in vars(_solution).items() if not name.startswith("__")})

MUST_FAIL = ["test_items_follow_the_grammar_for_every_reply", "test_every_done_carries_exactly_its_deltas",
             "test_a_plain_reply_is_one_message_item"]
MAY_COST = [1]


class ResponsesEventFormatter(_solution.ResponsesEventFormatter):
    def events(self, out: Any) -> list[dict[str, Any]]:
        events = super().events(out)
        item = self._item
        if item is not None and item["type"] == "message" and out.text:
            events.append(self._emit("response.output_text.done", item_id=item["id"], output_index=len(self.output),
                                     content_index=0, text="".join(self._parts), logprobs=[]))
        return events
