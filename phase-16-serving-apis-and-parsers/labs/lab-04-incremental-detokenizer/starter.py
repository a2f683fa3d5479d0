"""Lab 04 starter: incremental detokenization with the tokenizer's own ``decode``.

Fill in the tasks below (see README.md, "Your task"). Run the tests with:

    make lab-04

Use ``tokenizer.decode(ids, skip_special_tokens=...)`` only: the tests hand you a
tokenizer that counts the ids you decode and refuses any other way to the bytes.
"""

from __future__ import annotations

from collections.abc import Sequence

from mini_vllm.tokenizers.base import REPLACEMENT_CHAR, Tokenizer  # noqa: F401 (you will want U+FFFD)


class IncrementalDetokenizer:
    """Streams the text of generated tokens, using only ``tokenizer.decode``.

    The concatenation of every ``push`` and the final ``flush`` must be the output's text:
    ``decode(prompt + output)[len(decode(prompt)):]`` whenever the prompt ends between
    characters. The prompt's complete characters are never shown; a character the prompt
    leaves unfinished belongs to the output, shown with the token that completes it (or, if
    the output breaks it, as the output's U+FFFD). It must hold on every tokenizer family
    (``mini_vllm.TOKENIZER_FAMILIES``) and every window >= 1.
    """

    def __init__(self, tokenizer: Tokenizer, prompt_ids: Sequence[int] = (), window: int = 4,
                 skip_special_tokens: bool = False) -> None:
        """Remember the prompt as already shown (task 3; a prompt that ends inside a character: task 4),
        and set up what ``push`` needs.

        Reject a ``window`` that is not an int >= 1, and a bad prompt id, with ValueError.
        """
        raise NotImplementedError("lab-04 task 1: implement IncrementalDetokenizer.__init__ — see README, 'Your task'")

    def push(self, token_id: int) -> str:
        """Add one generated token; return the text that is now certain (maybe "")."""
        raise NotImplementedError("lab-04 task 1: implement IncrementalDetokenizer.push — see README, 'Your task'")

    def flush(self) -> str:
        """End of stream: return what is still pending, U+FFFD and all."""
        raise NotImplementedError("lab-04 task 3: implement IncrementalDetokenizer.flush — see README, 'Your task'")

