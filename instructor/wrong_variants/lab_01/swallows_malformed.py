"""Wrong on purpose: a malformed call is dropped silently instead of raising."""

from mini_vllm.labs import lab_dir

MUST_FAIL = ["test_malformed_call_raises_with_the_raw_text",
             "test_malformed_block_in_a_reply_is_loud",
             "test_malformed_call_in_a_stream_raises_and_changes_nothing"]
MAY_COST = [1, 3, 4, 5, 6]

# The reference solution with one mistake: each (old, new) pair replaces whole lines of it.
MISTAKE = [
    (r'''
    try:
        payload = json.loads(raw, object_pairs_hook=_refuse_repeated_keys)
    except ValueError as error:  # not JSON (json.JSONDecodeError), or a repeated key
        raise ToolCallParseError(raw, f"not valid JSON for a call: {error}") from error
    if not isinstance(payload, dict):
        raise ToolCallParseError(raw, "the body must be a JSON object")
    if not isinstance(payload.get("name"), str) or not payload["name"]:
        raise ToolCallParseError(raw, 'the object needs a non-empty string "name"')
    if not isinstance(payload.get("arguments"), dict):
        raise ToolCallParseError(raw, '"arguments" must be a JSON object')
''', r'''
    try:
        payload = json.loads(raw, object_pairs_hook=_refuse_repeated_keys)
    except ValueError:
        return None  # the mistake: the call silently disappears
    if not isinstance(payload, dict) or not isinstance(payload.get("name"), str) or not payload["name"] \
            or not isinstance(payload.get("arguments"), dict):
        return None  # the mistake: the call silently disappears
'''),
    (r'''
        calls.append(parse_call(body if end is None else body[:end]))
''', r'''
        calls += [c for c in [parse_call(body if end is None else body[:end])] if c]  # the mistake: no trace
'''),
    (r'''
            out.tool_calls.append(parse_call("".join(self._pieces) + window[:end]))
''', r'''
            out.tool_calls += [c for c in [parse_call("".join(self._pieces) + window[:end])] if c]  # mistake
'''),
    (r'''
            last.tool_calls.append(parse_call("".join(self._pieces) + self._unscanned))
''', r'''
            last.tool_calls += [c for c in [parse_call("".join(self._pieces) + self._unscanned)] if c]
'''),
]
_wrong = (lab_dir("lab-01") / "solution.py").read_text(encoding="utf-8")
for _old, _new in MISTAKE:
    assert _wrong.count(_old) == 1, f"the reference changed: update this variant ({_old.strip()[:40]})"
    _wrong = _wrong.replace(_old, _new)
exec(compile(_wrong, __file__, "exec"))
