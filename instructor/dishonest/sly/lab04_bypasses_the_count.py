# Appended to lab-04's reference by tests/test_grader_sandbox.py: a slow-but-correct submission.
# Each push also decodes the whole history (quadratic work), through the first way it finds around the
# counting tokenizer's count: its inner tokenizer, private fields, the class, the channel, the stand-in's
# own call, counters reset by assignment. Every one must fail or still be counted, so the cost tests fail.
import gc as _gc

_Reference = IncrementalDetokenizer  # noqa: F821 (the reference's class, above)


def _uncounted_decode(tokenizer):
    if not hasattr(tokenizer, "_home"):  # a plain tokenizer (its own copy): nothing counts it anyway
        return tokenizer.decode
    for attempt in (lambda: tokenizer.inner.decode,
                    lambda: object.__getattribute__(tokenizer, "inner").decode,
                    lambda: vars(tokenizer)["inner"].decode,
                    lambda: tokenizer._inner.decode,
                    lambda: tokenizer.backend.decode):
        try:
            return attempt()
        except Exception:
            pass
    for name in ("ids_decoded", "decode_calls", "limit"):  # reset the counters by assignment
        try:
            setattr(tokenizer, name, 0 if name != "limit" else None)
        except Exception:
            pass
    peer = next((o for o in _gc.get_objects() if type(o).__name__ == "StudentPeer"), None)
    home = getattr(tokenizer, "_home", None)
    if peer is not None and isinstance(home, int):  # ask the trusted side itself
        for request in (("setattr", home, "ids_decoded", -10**9), ("setattr", home, "limit", None),
                        ("call", home, "sandbox_account", [{"ids_decoded": -10**9}], {}),
                        ("getattr", home, "inner")):
            try:
                peer.request(*request)
            except Exception:
                pass
    try:  # a class of its own whose decode does not call back: it has nothing to decode with
        class Quiet(type(tokenizer)):
            def decode(self, ids, skip_special_tokens=False):
                return ""
        original = type(tokenizer)
        tokenizer.__class__ = Quiet
        tokenizer.__class__ = original  # it has nothing to step or decode with, so the swap buys nothing
    except Exception:
        pass
    call = getattr(tokenizer, "_call", None)  # the stand-in's own call back: still served, still counted
    if call is not None:
        return lambda ids: call("decode", [list(ids), False])
    return tokenizer.decode


class IncrementalDetokenizer(_Reference):
    def __init__(self, tokenizer, prompt_ids=(), window=4, skip_special_tokens=False):
        super().__init__(tokenizer, prompt_ids, window=window, skip_special_tokens=skip_special_tokens)
        self._slow_history = list(prompt_ids)
        self._slow_decode = _uncounted_decode(tokenizer)

    def push(self, token_id):
        text = super().push(token_id)
        self._slow_history.append(token_id)
        self._slow_decode(self._slow_history)  # the whole history, every token
        return text
