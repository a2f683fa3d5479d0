"""Wrong on purpose: response.output_text.delta goes out without its `logprobs` list. The openai SDK's
ResponseTextDeltaEvent requires it (an empty list when no log probabilities were asked for)."""

from instructor.variants import run_reference_with_mistake

MISTAKE = {"content_index=0, delta=text, logprobs=[])]": "content_index=0, delta=text)]"}
run_reference_with_mistake("lab-07", MISTAKE, globals())

MUST_FAIL = ["test_item_events_are_exactly_the_sdk_types"]
MAY_COST = [1]
