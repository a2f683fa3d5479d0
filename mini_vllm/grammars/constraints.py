"""Which grammar a request asks for: ``response_format``, ``text.format`` or a forced tool call, as a regex
(lab-08) or, where no regex holds it, as a grammar with a stack (lab-09).

The routes' request models call these while they read a body, so an unsupported schema
keyword is a 400 naming it before any work starts. The grammar itself is compiled and
enforced by lab-08's code, and by lab-09's for a recursive schema and for ``json_object``
(``mini_vllm.server.structured``).

Two rules a client can rely on:

- **A schema and stop strings do not mix.** A stop string cuts the reply where it appears,
  and a cut JSON text no longer matches its schema. Rather than send a reply that breaks
  the promise of ``strict``, the server refuses the pair with a 400 naming ``stop``.
- **A forced tool call is the whole reply**: ``<tool_call>``, the call's JSON with the
  tool's ``parameters`` as its arguments, ``</tool_call>``, then the end. A thought (when
  thinking is on) comes first and is free; the grammar starts after ``</think>``, or at
  ``<tool_call>`` when the model begins its call without closing the thought (lab-06's rule).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from mini_vllm.api.errors import ApiError
from mini_vllm.grammars.grammar import schema_to_regex
from mini_vllm.grammars.schema_grammar import Sentence, json_object_sentence, schema_sentence, sentence_grammar
from mini_vllm.grammars.schema_regex import NeedsStack, TooManyStates, UnsupportedSchema

# JSON mode (``json_object``) promises a JSON object, no schema: any JSON object, nested as deep as the
# reply goes, which only a grammar with a stack holds (lab-09). While lab-09 is still the starter's
# stub, the server serves this flat object of strings, numbers, booleans and nulls instead (lab-08).
_STRING = r'"([^"\\\x00-\x1F\x7F-\x9F]|\\["\\/bfnrt])*"'
_VALUE = rf'({_STRING}|(-)?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?|true|false|null)'
_MEMBER = rf'{_STRING}[ ]?:[ ]?{_VALUE}'
FLAT_JSON_OBJECT = rf'\{{[ ]?({_MEMBER}([ ]?,[ ]?{_MEMBER})*)?[ ]?\}}'
_SPECIAL = set("\\.^$|?*+()[]{}/")
CALL_CLOSING = "}\n</tool_call>"  # after a forced call's arguments


@dataclass(frozen=True)
class Constraint:
    """A grammar a reply must match, and what it came from (for messages).

    ``regex``: lab-08's regular expression ("" when none holds the grammar). ``sentence``: the grammar
    with a stack lab-09 serves (None when the regex is the whole story); with both, the regex is the
    fallback while lab-09 is a stub.
    """

    regex: str
    source: str  # "response_format json_schema", "json_object", "tool_call", ...
    sentence: Sentence | None = None
    stack_if_slow: Sentence | None = None  # the same schema with a stack, where the regex compiles too slowly


def literal(text: str) -> str:
    """``text`` as a regular expression that matches exactly it."""
    return "".join("\\n" if c == "\n" else "\\" + c if c in _SPECIAL else c for c in text)


def schema_constraint(schema: Any, param: str, source: str) -> Constraint:
    """The constraint of a JSON Schema, or a 400 naming the first keyword the course does not support.

    A regular expression where one holds it. A grammar with a stack where none does: a recursive schema,
    or one whose regex would pass its size limit (nesting and maxItems copy a regex, not a grammar); its
    checks and limits run here too, before any work. Beside a regex, the same schema with a stack, for the
    compile to fall back on where the regex's automaton takes longer than its budget (``compile_pool``)."""
    try:
        try:
            regex: str | None = schema_to_regex(schema)
        except (NeedsStack, TooManyStates):
            regex = None
        if regex is None:
            sentence = schema_sentence(schema)
            sentence_grammar(sentence)
            return Constraint("", source, sentence)
        try:
            sentence = schema_sentence(schema)
            sentence_grammar(sentence)
        except UnsupportedSchema:  # past the stack's own limit (rules and lexemes): the regex alone, then
            return Constraint(regex, source)
        return Constraint(regex, source, stack_if_slow=sentence)
    except UnsupportedSchema as error:
        raise ApiError(400, f"unsupported JSON Schema: {error} (this server serves OpenAI strict mode's subset "
                       "exactly, within its published limits, or refuses it)", param=param,
                       code="unsupported_schema") from error


def strict_rules(schema: Any, param: str, name: str) -> None:
    """OpenAI's strict mode (``strict: true``): every object lists each of its properties in ``required`` and sets
    ``additionalProperties: false``; else OpenAI's 400, naming the object (its path, as OpenAI's ``context``).

    Without ``strict`` the server still serves the schema exactly; strict mode's promise is the schema's shape."""
    def walk(node: Any, context: tuple[str, ...]) -> None:
        if isinstance(node, list):
            for i, item in enumerate(node):
                walk(item, (*context, str(i)))
            return
        if not isinstance(node, dict):
            return
        declared = node.get("type")
        kinds: list[Any] = declared if isinstance(declared, list) else [declared]
        if "object" in kinds or "properties" in node:
            where = f"Invalid schema for {name}: In context={context}, "
            if node.get("additionalProperties") is not False:
                raise ApiError(400, where + "'additionalProperties' is required to be supplied and to be false.",
                               param=param, code="invalid_json_schema")
            listed, wanted = node.get("properties"), node.get("required")
            properties: dict[str, Any] = listed if isinstance(listed, dict) else {}
            required: list[Any] = wanted if isinstance(wanted, list) else []
            missing = [key for key in properties if key not in required]
            if missing:
                raise ApiError(400, where + "'required' is required to be supplied and to be an array including "
                               f"every key in properties. Missing '{missing[0]}'.", param=param,
                               code="invalid_json_schema")
        for keyword in ("properties", "$defs", "definitions"):
            if isinstance(node.get(keyword), dict):
                for key, sub in node[keyword].items():
                    walk(sub, (*context, keyword, key))
        for keyword in ("items", "anyOf"):
            if keyword in node:
                walk(node[keyword], (*context, keyword))

    walk(schema, ())


def json_object_constraint(source: str = "json_object") -> Constraint:
    return Constraint(FLAT_JSON_OBJECT, source, json_object_sentence())


def tool_call_constraint(tools: Sequence[tuple[str, dict[str, Any] | None]], param: str) -> Constraint:
    """A call to one of ``tools`` ((name, parameters schema) pairs), in the toy model's ``<tool_call>`` format."""
    calls = []
    for i, (name, parameters) in enumerate(tools):
        schema = object_schema(parameters, f"{param}[{i}]")
        arguments = schema_constraint(schema, f"{param}[{i}]", "tool")
        calls.append(('<tool_call>\n{"name": ' + f'"{name}"' + ', "arguments": ', schema, arguments))
    if all(arguments.sentence is None for _, _, arguments in calls):
        regexes = [literal(opening) + arguments.regex + literal(CALL_CLOSING) for opening, _, arguments in calls]
        return Constraint(regexes[0] if len(regexes) == 1 else "(" + "|".join(regexes) + ")", "tool_call")
    # Some tool's arguments recurse: every call is written with a stack (text, the arguments' schema, text).
    sentence = tuple((("text", opening), *schema_sentence(schema)[0], ("text", CALL_CLOSING))
                     for opening, schema, _ in calls)
    try:
        sentence_grammar(sentence)  # the limits hold for the calls together
    except UnsupportedSchema as error:
        raise ApiError(400, f"unsupported JSON Schema: {error}", param=param, code="unsupported_schema") from error
    return Constraint("", "tool_call", sentence)


def object_schema(parameters: Any, param: str) -> dict[str, Any]:
    """A tool's parameters as an object schema (a call's arguments are always a JSON object), or a 400."""
    if parameters is None or parameters == {}:
        return {"type": "object", "properties": {}}
    root = [k for k in ("anyOf", "$ref", "enum", "const") if isinstance(parameters, dict) and k in parameters]
    if not isinstance(parameters, dict) or parameters.get("type", "object") != "object" or root:
        why = f"{root[0]!r} at its root is not supported" if root else f"got {str(parameters)[:60]}"
        raise ApiError(400, "a forced tool call needs parameters that are an object schema (\"type\": \"object\"), "
                       f"since a call's arguments are a JSON object: {why}", param=param, code="unsupported_schema")
    return {**parameters, "type": "object"}


def refuse_stop(constraint: Constraint | None, stop: Sequence[str], param: str = "stop") -> None:
    if constraint is not None and stop:
        raise ApiError(400, f"stop strings cannot be combined with a {constraint.source}: a stop string would cut "
                       "the constrained reply, which would then no longer match its grammar", param=param)

