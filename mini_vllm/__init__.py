"""mini_vllm: a small teaching engine for the text pipeline at the front door of an LLM server."""

import sys

# jsonschema (which mistral-common imports) imports rfc3987-syntax when it is installed, and Jupyter installs it; that
# builds ~40 Earley parsers at import, 1.2 s of every process that loads a Mistral tokenizer (each grading child, the
# test run, the server), for jsonschema's "iri" format check, which only a FormatChecker runs and nothing here uses.
# Marked missing, jsonschema skips registering that one check.
sys.modules.setdefault("rfc3987_syntax", None)  # type: ignore[arg-type]

from mini_vllm.tokenizers.base import Tokenizer  # noqa: E402
from mini_vllm.tokenizers.bpe import BPETokenizer  # noqa: E402
from mini_vllm.tokenizers.byte import ByteTokenizer  # noqa: E402
from mini_vllm.tokenizers.families import TOKENIZER_FAMILIES, load_tokenizer  # noqa: E402
from mini_vllm.tokenizers.spm import SentencePieceBPETokenizer  # noqa: E402

__all__ = ["TOKENIZER_FAMILIES", "BPETokenizer", "ByteTokenizer", "SentencePieceBPETokenizer", "Tokenizer",
           "load_tokenizer"]
