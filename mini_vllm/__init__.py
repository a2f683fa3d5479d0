"""mini_vllm: a small teaching engine for the text pipeline at the front door of an LLM server."""

from mini_vllm.bpe_tokenizer import BPETokenizer
from mini_vllm.byte_tokenizer import ByteTokenizer
from mini_vllm.families import TOKENIZER_FAMILIES, load_tokenizer
from mini_vllm.spm_tokenizer import SentencePieceBPETokenizer
from mini_vllm.tokenizer_base import Tokenizer

__all__ = ["TOKENIZER_FAMILIES", "BPETokenizer", "ByteTokenizer", "SentencePieceBPETokenizer", "Tokenizer",
           "load_tokenizer"]
