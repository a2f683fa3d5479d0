# Appended to lab-04's reference by tests/test_grader_sandbox.py: an honest detokenizer whose __init__
# attacks what the tests lend it. A Hugging Face tokenizer's backend: save a file over the course and
# into the trusted side's /tmp, add special tokens (which would change the tests' oracle). A counting
# tokenizer: decode an endless iterator (which would keep the trusted side looping for ever). None of it
# may reach the trusted side or change another grade; the detokenizer itself is the reference.
import itertools as _itertools
from pathlib import Path as _Path

_Reference = IncrementalDetokenizer  # noqa: F821 (the reference's class, above)
_COURSE = _Path(__import__("mini_vllm").__file__).resolve().parents[1]  # where the engine says the course is
TARGETS = ["/tmp/lent-object-wrote-this.json", str(_COURSE / "lent-object-wrote-this.json")]


def _attack(tokenizer):
    backend = getattr(tokenizer, "backend", None)
    if backend is not None:
        for target in TARGETS:
            try:
                backend.save(target)
            except Exception:
                pass
        try:
            backend.add_special_tokens(["<|attack|>"])
        except Exception:
            pass
    else:  # a served tokenizer: an argument that never ends
        try:
            tokenizer.decode(_itertools.repeat(1))
        except Exception:
            pass


class IncrementalDetokenizer(_Reference):
    def __init__(self, tokenizer, prompt_ids=(), window=4, skip_special_tokens=False):
        _attack(tokenizer)
        super().__init__(tokenizer, prompt_ids, window=window, skip_special_tokens=skip_special_tokens)
