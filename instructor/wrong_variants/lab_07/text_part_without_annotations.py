"""Wrong on purpose: an output_text part (in content_part.added, content_part.done and the message
item) has no `annotations` list. The openai SDK's ResponseOutputText requires it."""

from instructor.variants import run_reference_with_mistake

MISTAKE = {
    """        return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}""":
    """        return {"type": "output_text", "text": text, "logprobs": []}""",
}
run_reference_with_mistake("lab-07", MISTAKE, globals())

MUST_FAIL = ["test_item_events_are_exactly_the_sdk_types"]
MAY_COST = [1]
