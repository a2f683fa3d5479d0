"""Wrong on purpose: a tool call's arguments, already JSON text, are written with json.dumps again: a string
holding JSON where the model was trained on an object (QwenLM/Qwen3-Coder#444)."""

from instructor.variants import run_reference_with_mistake

MISTAKE = {'body = json.dumps({"name": call.name, "arguments": _arguments_object(call)}, ensure_ascii=False)':
           'body = json.dumps({"name": call.name, "arguments": call.arguments}, ensure_ascii=False)'}
run_reference_with_mistake("lab-10", MISTAKE, globals())

MUST_FAIL = ["test_a_tool_calls_arguments_are_an_object_written_once", "test_chatml_spells_the_template",
             "test_chatml_ids_are_the_template_encoded"]
MAY_COST = [2]
