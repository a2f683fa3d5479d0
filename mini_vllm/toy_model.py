"""A deterministic toy "model": scripted replies (:mod:`mini_vllm.toy_scripts`), one token id at a time.

The reply is chosen from keywords in the last user message, so a test (or a person with
curl) can ask for exactly the case it wants to see. Like a real model, it reads the end of
its prompt: when the chat template already opened the thought (``<think>\n``), it does not
write `<think>` again, and when the last turn is a tool's result, it answers by quoting that
result, so an agent loop that called a tool can finish.

For constrained decoding (lab-08) it also has a *scoring mode*: :meth:`ToyModel.scores` gives
seeded scores over the whole vocabulary, biased toward every token that continues its
scripted reply, so a sampler has a real choice to make. Replies asked for as JSON are chatty
(prose around the object, as real models write them), so the unconstrained choice breaks a
schema and the masked one cannot. The scripted replies of :meth:`ToyModel.reply_ids` do not
change.
"""

from __future__ import annotations

import contextlib
import hashlib
import weakref
from array import array
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy

from mini_vllm.tokenizers.base import Tokenizer, encode_continuation
from mini_vllm.toy_scripts import (
    EMPTY_THOUGHT,
    THINK_CLOSE,
    THINK_OPEN,
    TOOL_RESULT_REPLY,
    place_in_script,
    scored_script,
    script_for,
    tool_result,
)

TAIL_IDS = 2048  # how far back the model looks for a tool's turn (never the whole of a huge prompt)
SCRIPT_BONUS = 2.0  # added to every token that continues the script: above any noise
NOISE = 1.0  # seeded uniform noise in [0, NOISE): which continuation wins, and the order of the rest
CLOSING_BONUS = 1.2  # a token that closes what is open (and EOS): above noise, below the script
NOISE_AHEAD = 64  # steps of noise drawn ahead and kept (1 MiB each on Tekken, inside the decode process's 1 GiB)
# Draws the noise of the steps ahead (``draw_ahead``), made at its first use: one thread, since numpy's fill runs
# without the GIL and a second core is all a 2-core machine has for it.
_DRAWER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="mini_vllm-noise")
OUTPUTS_KEPT = 64  # replies whose output bytes scores() keeps between steps (one per user message)


class ToyModel:
    """Turns a user message into the token ids of its scripted reply, ending with EOS."""

    def __init__(self, tokenizer: Tokenizer, seed: int = 0) -> None:
        self.tokenizer = tokenizer
        self.seed = seed
        self._noise: dict[tuple[str, int], Future[array[float]]] = {}  # drawn ahead: (user message, step) -> noise
        self._outputs: dict[str, tuple[list[int], bytes]] = {}  # user message -> the ids asked with last, their bytes

    def _draw_noise(self, user_message: str, step: int) -> array[float]:
        """The seeded noise of one step's scores, as the flat array the scores are handed back in."""
        digest = hashlib.blake2b(f"scores:{self.seed}:{step}:{user_message}".encode(), digest_size=8)
        # Written straight into the array handed back (a flat buffer, indexed like a list: tolist() would box
        # 131,072 floats), with no copy after: on Tekken the copy cost as much as drawing the noise.
        out = array("d", [0.0]) * self.tokenizer.vocab_size
        noise = numpy.frombuffer(out, dtype=numpy.float64)
        numpy.random.default_rng(int.from_bytes(digest.digest(), "big")).random(self.tokenizer.vocab_size, out=noise)
        if NOISE != 1.0:  # x * 1.0 is x: a pass over the vocabulary saved
            noise *= NOISE
        return out

    def draw_ahead(self, user_message: str, step: int) -> None:
        """Start drawing the noise of ``scores`` at ``step`` (the same values) in the model's drawing thread: numpy
        fills the array without the GIL, so on Tekken the ~0.4 ms of drawing 131,072 numbers runs beside the rest
        of the token (a decode process calls this as soon as it has a step's scores) instead of on its path."""
        key = (user_message, step)
        if key in self._noise:
            return
        with contextlib.suppress(RuntimeError, StopIteration, KeyError):  # another reply's thread changed the dict
            while len(self._noise) >= NOISE_AHEAD:
                self._noise.pop(next(iter(self._noise))).cancel()
        self._noise[key] = _DRAWER.submit(self._draw_noise, user_message, step)

    def _output_bytes(self, table: _ScoreTable, user_message: str, output_ids: Sequence[int]) -> bytes:
        """The output's bytes (special tokens left out). A reply asks at every step with one id more: the bytes of the
        ids it asked with last are kept (per message), so a step joins its new ids only, not the whole reply again
        (at 2,000 ids that was ~0.2 ms a token). Another reply with the same message may replace what is kept: the
        prefix is checked, and on a mismatch the whole output is joined, as before."""
        special, data = table.special, table.data
        ids = list(output_ids)
        kept = self._outputs.get(user_message)
        if kept is not None and len(kept[0]) <= len(ids) and ids[:len(kept[0])] == kept[0]:
            output = kept[1] + b"".join(data[i] for i in ids[len(kept[0]):] if i not in special)
        else:
            output = b"".join(data[i] for i in ids if i not in special)
        with contextlib.suppress(RuntimeError, StopIteration, KeyError):  # another reply's thread changed the dict
            while len(self._outputs) >= OUTPUTS_KEPT:
                self._outputs.pop(next(iter(self._outputs)))
        self._outputs[user_message] = (ids, output)
        return output

    def _noise_at(self, user_message: str, step: int) -> array[float]:
        """The noise at ``step``: drawn ahead, or (not asked for, or not started yet: then drawn here, not queued
        behind other replies' draws) drawn now."""
        ahead = self._noise.pop((user_message, step), None)
        if ahead is None or ahead.cancel():
            return self._draw_noise(user_message, step)
        return ahead.result()

    def reply_ids(self, user_message: str, prompt_ids: Sequence[int] = ()) -> list[int]:
        # Encoded as the continuation of a prompt, so spm does not add a word-initial space.
        return [*encode_continuation(self.tokenizer, self.reply_text(user_message, prompt_ids)),
                self.tokenizer.eos_token_id]

    def reply_text(self, user_message: str, prompt_ids: Sequence[int] = ()) -> str:
        """The scripted reply, continuing the prompt: a thought the template opened is not opened again.

        When the last turn of the prompt is a tool's result, the reply quotes it (an agent loop
        can then finish) instead of answering the user's message again.
        """
        tail = self.tokenizer.decode(list(prompt_ids[-TAIL_IDS:])) if prompt_ids else ""
        result = tool_result(tail)
        reply = TOOL_RESULT_REPLY.format(result) if result is not None else script_for(user_message, self.seed)
        if not tail.endswith(THINK_OPEN + "\n"):
            return reply
        if reply.startswith(THINK_OPEN + "\n"):
            return reply[len(THINK_OPEN + "\n") :]  # the template wrote "<think>\n" already
        return EMPTY_THOUGHT.lstrip("\n") + THINK_CLOSE + "\n\n" + reply

    def scores(self, user_message: str, output_ids: Sequence[int], opened_thought: bool = False) -> Sequence[float]:
        """Scoring mode: one score per token id for the next token after ``output_ids``.

        Seeded noise (the seed and the step) plus :data:`SCRIPT_BONUS` for every token whose
        bytes continue the scripted reply from where the output stands in it, a little more
        for longer ones; EOS gets the bonus once the script is done (or once the output is as long
        as the script: the reply it would have written is over, however a mask bent it). Below the
        script's bonus, above any noise, tokens that *close* what is open (``"``, ``}``, ``]``; then ``,``) and
        EOS get :data:`CLOSING_BONUS`: once a grammar's mask leaves the script nothing to
        continue with, the reply closes its strings and brackets and ends, in a few tokens,
        instead of writing noise until ``max_tokens``. Special tokens never get a bonus.
        ``opened_thought``: the chat template already wrote ``<think>\n``, so the script goes on
        from inside the thought (as :meth:`reply_text` does; a reply without a thought closes
        the opened one first). Deterministic: the same arguments give the same scores.
        """
        tokenizer = self.tokenizer
        table = _score_table(tokenizer)
        output = self._output_bytes(table, user_message, output_ids)
        text = scored_script(user_message, self.seed)
        if opened_thought:
            if text.startswith(THINK_OPEN + "\n"):
                text = text[len(THINK_OPEN + "\n"):]
            elif THINK_CLOSE not in text:
                text = EMPTY_THOUGHT.lstrip("\n") + THINK_CLOSE + "\n\n" + text
        script = text.encode("utf-8")
        out = self._noise_at(user_message, len(output_ids))
        scores = numpy.frombuffer(out, dtype=numpy.float64)
        scores[table.closers] += CLOSING_BONUS
        scores[table.separators] += CLOSING_BONUS - 0.1
        scores[tokenizer.eos_token_id] += CLOSING_BONUS + 0.1
        # The reply the model would have written is as long as its script: past that many bytes it is over, however
        # a mask bent it (a tail found again in a script that repeats itself would otherwise go round for ever), and
        # only what closes the open value, then EOS, is left to score.
        at = len(script) if len(output) >= len(script) else place_in_script(script, output)
        if at is not None:
            rest = script[at:]
            if not rest:
                scores[tokenizer.eos_token_id] += SCRIPT_BONUS
            for size in range(1, min(table.longest, len(rest)) + 1):
                for token_id in table.by_bytes.get(rest[:size], ()):
                    scores[token_id] += SCRIPT_BONUS + size / (size + 1)
        return out


@dataclass(frozen=True)
class _ScoreTable:
    """A tokenizer's tokens as the scoring mode reads them (computed once per tokenizer)."""

    data: list[bytes]
    special: frozenset[int]
    by_bytes: dict[bytes, list[int]]  # ordinary tokens by their bytes
    longest: int
    closers: numpy.ndarray  # tokens made of '"', '}', ']' (and spaces)
    separators: numpy.ndarray  # the same with a ',' among them


_TABLES: weakref.WeakKeyDictionary[Any, _ScoreTable] = weakref.WeakKeyDictionary()


def _score_table(tokenizer: Tokenizer) -> _ScoreTable:
    if tokenizer not in _TABLES:
        data = _token_bytes(tokenizer)
        special = frozenset(tokenizer.all_special_ids) | {tokenizer.eos_token_id}
        by_bytes: dict[bytes, list[int]] = {}
        closers, separators = [], []
        for token_id, token in enumerate(data):
            if not token or token_id in special:
                continue
            by_bytes.setdefault(token, []).append(token_id)
            core = token.strip(b" \n")
            if core and not core.strip(b'"}]'):
                closers.append(token_id)
            elif core and not core.strip(b'"}],'):
                separators.append(token_id)
        _TABLES[tokenizer] = _ScoreTable(data, special, by_bytes, max(map(len, by_bytes), default=1),
                                         numpy.array(closers, dtype=numpy.int64),
                                         numpy.array(separators, dtype=numpy.int64))
    return _TABLES[tokenizer]


_BYTES_CACHE: weakref.WeakKeyDictionary[Any, list[bytes]] = weakref.WeakKeyDictionary()


def _token_bytes(tokenizer: Tokenizer) -> list[bytes]:
    """Every token's bytes (special ones included), computed once per tokenizer object."""
    if tokenizer not in _BYTES_CACHE:
        _BYTES_CACHE[tokenizer] = [tokenizer.decode_single_token_bytes(i) for i in range(tokenizer.vocab_size)]
    return _BYTES_CACHE[tokenizer]
