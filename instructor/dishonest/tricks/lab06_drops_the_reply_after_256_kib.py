# Appended to lab-06's reference by tests/test_grader_sandbox.py (issue 42's table, lab-06): a parser that keeps
# the whole reply (and reads it again every chunk), and, once the reply passes 256 KiB (only the memory test
# feeds that much), drops it and returns empty deltas. With TRICK = False it is the honest submission that
# keeps everything and loses the memory test; with the trick it must score no more: the memory test checks
# every delta before it reads the memory.
TRICK = True

_Reference = StreamingReasoningParser  # noqa: F821 (the reference's class, above)


class StreamingReasoningParser(_Reference):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._reply = ""

    def feed(self, text):
        delta = super().feed(text)
        self._reply += text
        self._reply.count("</think>")  # the whole reply, read again every chunk
        if TRICK and len(self._reply) > 256 * 1024:
            self._reply = ""
            return ReasoningDelta()  # noqa: F821 (the reference's import, above)
        return delta
