# Appended to lab-04's reference by tests/test_grader_sandbox.py: a correct detokenizer that, once a stream is
# long (a hundred pushes: the cost tests' streams, and the tokenizer it is handed is served, as every lab-04
# tokenizer is: its methods run on the tests' side), keeps the tests' side busy instead: encode the longest text one request may carry, convert and decode the most ids, in a loop that never
# ends. Each served request counts against its call's CPU budget and is stopped there, so the cost tests fail
# in bounded time, the grader's own work for it stays within one budget per attempt, and no other grade changes.
_Reference = IncrementalDetokenizer  # noqa: F821 (the reference's class, above)


def _flood(tokenizer):
    text = "データ 🫨 ab " * (2**20 // 10)  # just under 2**20 characters, the most one served string may hold
    ids = [1] * 2**16  # the most ids one served call may take
    while True:
        for attempt in (lambda: tokenizer.encode(text), lambda: tokenizer.convert_ids_to_tokens(ids),
                        lambda: tokenizer.decode(ids)):
            try:
                attempt()
            except Exception:
                pass


class IncrementalDetokenizer(_Reference):
    def __init__(self, tokenizer, *args, **kwargs):
        super().__init__(tokenizer, *args, **kwargs)
        self._served = tokenizer if hasattr(tokenizer, "_home") else None
        self._pushes = 0

    def push(self, token_id):
        self._pushes += 1
        if self._served is not None and self._pushes > 100:
            _flood(self._served)
        return super().push(token_id)
