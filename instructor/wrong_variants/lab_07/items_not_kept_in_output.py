"""Wrong on purpose: close numbers the items with a counter of its own and never keeps them in ``self.output``.

Every item event is right (output_index too), but the final response the given ``response_object`` builds from
``self.output`` holds no items: a client that reads the final response (a non-streamed request, the Agents SDK)
gets an empty answer.
"""

from mini_vllm.labs import impl_path

MUST_FAIL = ["test_closed_items_are_kept_in_output"]
MAY_COST = [1]

_source = impl_path("lab-07", "solution").read_text(encoding="utf-8")
_MISTAKES = {"len(self.output)": "self._closed",  # every place the reference numbers items by what it kept
             "        self.output.append(done)\n": "        self._closed += 1\n",
             "        self.sequence_number = 0  # the next event's number\n":
             "        self.sequence_number = 0  # the next event's number\n        self._closed = 0\n"}
for _right, _wrong in _MISTAKES.items():
    if _right not in _source:
        raise ValueError(f"{_right.strip()[:60]!r} is not in lab-07's solution: update the variant")
    _source = _source.replace(_right, _wrong)
exec(compile(_source, __file__, "exec"), globals())
