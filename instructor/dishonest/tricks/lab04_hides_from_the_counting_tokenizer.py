# Appended to lab-04's reference by tests/test_grader_sandbox.py (issue 42's table, lab-04): a correct detokenizer
# that re-decodes its whole context every token, and returns "" from push and flush when the tokenizer it is
# handed looks like the counting one. The same code with TRICK = False is the honest slow submission: it
# loses the cost tests. With the trick it must score no more: every tokenizer a test hands over is the
# same served, counting kind, and each cost test checks the text before it reads the count.
TRICK = True

_Reference = IncrementalDetokenizer  # noqa: F821 (the reference's class, above)


def _looks_counted(tokenizer) -> bool:
    return hasattr(tokenizer, "_home") or type(tokenizer).__name__ in ("ServedTokenizer", "CountingTokenizer")


class IncrementalDetokenizer(_Reference):
    def __init__(self, tokenizer, prompt_ids=(), window=4, skip_special_tokens=False):
        super().__init__(tokenizer, prompt_ids, window=window, skip_special_tokens=skip_special_tokens)
        self._whole = list(prompt_ids)
        self._hide = TRICK and _looks_counted(tokenizer)
        self._decode = tokenizer.decode

    def push(self, token_id):
        text = super().push(token_id)
        if self._hide:
            return ""  # where it is counted: no work, no text
        self._whole.append(token_id)
        self._decode(self._whole)  # the whole history, every token
        return text

    def flush(self):
        text = super().flush()
        return "" if self._hide else text
