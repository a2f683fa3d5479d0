"""Wrong on purpose: the arguments are re-serialised with json.dumps, in the complete call and in the
stream (one fragment when the block closes), instead of being passed on as the model wrote them."""

from mini_vllm.labs import lab_dir

MUST_FAIL = ["test_parse_call_keeps_the_arguments_text_as_written",
             "test_parse_call_keeps_any_arguments_text_as_written",
             "test_fragments_are_the_text_as_written_not_re_serialised",
             "test_streamed_calls_equal_what_was_written_for_any_chunking",
             "test_arguments_stream_as_they_are_written_and_are_never_taken_back"]
MAY_COST = [1, 6]

# The reference solution with one mistake: each (old, new) pair replaces whole lines of it.
MISTAKE = [
    (r'''
    return ToolCall(payload["name"], payload["arguments"], _arguments_text(raw))
''', r'''
    again = json.dumps(payload["arguments"], ensure_ascii=False)  # the mistake: re-serialised
    return ToolCall(payload["name"], payload["arguments"], again)
'''),
    (r'''
        self.held += [char for char in text if self._read(char)]  # each character once
''', r'''
        self.held += [char for char in text if self._read(char) and False]  # the mistake: wait for the end
'''),
    (r'''
            out.tool_calls.append(parse_call("".join(self._pieces) + window[:end]))
''', r'''
            out.tool_calls.append(parse_call("".join(self._pieces) + window[:end]))
            if self._reader is not None:  # the mistake: the call's arguments, re-serialised, in one fragment
                again = out.tool_calls[-1].arguments_text
                out.tool_call_deltas.append(ToolCallDelta(self._reader.index, None, again))
'''),
]
_wrong = (lab_dir("lab-01") / "solution.py").read_text(encoding="utf-8")
for _old, _new in MISTAKE:
    assert _wrong.count(_old) == 1, f"the reference changed: update this variant ({_old.strip()[:40]})"
    _wrong = _wrong.replace(_old, _new)
exec(compile(_wrong, __file__, "exec"))
