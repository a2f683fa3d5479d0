"""A deterministic toy "model": scripted replies, streamed one token id at a time.

The reply is chosen from keywords in the last user message, so a test (or a person with
curl) can ask for exactly the case it wants to see: multilingual text, emoji, a stop
string, one or two tool calls, a call with a long argument (a file written through a tool),
a malformed call, a long reply to interrupt, or a reasoning model's `<think>` replies.
Like a real model, it reads the end of its prompt: when the chat template already opened
the thought (``<think>\n``), it does not write `<think>` again, and when the last turn is a
tool's result (a ChatML ``tool`` turn), it answers by quoting that result, so an agent loop
that called a tool can finish.

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
import json
import random
import weakref
from array import array
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy

from mini_vllm.tokenizers.base import Tokenizer, encode_continuation


def _call(name: str, arguments: dict[str, Any]) -> str:
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False) + "\n</tool_call>"


WEATHER_CALL: dict[str, Any] = {
    "name": "get_weather", "arguments": {"city": "東京", "unit": "celsius", "note": "🌸 花見"},
}
PARIS_CALL: dict[str, Any] = {"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}
OSAKA_CALL: dict[str, Any] = {"name": "book_table", "arguments": {"city": "大阪", "people": 2, "mood": "🫨🍜"}}
# A file written through a tool: about 1 kB of arguments (a thousand byte-level tokens), so a client
# sees them arrive in many fragments.
WRITE_FILE_CALL: dict[str, Any] = {"name": "write_file", "arguments": {
    "path": "notes/旅行.md",
    "content": "".join(f'{i:03d}. 東京 → 大阪 🚄 "day {i}" {{ok}} 花見 🌸 \\ done ✅\n' for i in range(12)),
    "overwrite": True,
}}
# The model forgets the envelope's closing brace: the server must say so, not drop the call.
BROKEN_CALL_TEXT = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}\n</tool_call>'

# The parts of the thinking replies, so tests can check each channel against what was written.
THOUGHT = "\nThe user wants me to think first. 2 + 2 = 4, and 東京 is Tokyo 🫨.\n"
ANSWER = "\n\nThe answer is 4. 🚀"
TOOL_THOUGHT = "\nThe user wants the weather in Tokyo. I should call the tool.\n"
STOP_THOUGHT = "\nThe user's stop word is STOP. I must not say STOP in the answer too early.\n"
STOP_ANSWER = "\n\nCounting: one, two. STOP here. This part should never reach you."
TWICE_THOUGHT = "\nA short thought.\n"
TWICE_ANSWER = "\n\nThe answer is 42.</think> Really."  # a duplicated end tag: a template artifact
THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
EMPTY_THOUGHT = "\nNothing to think about.\n"  # what it thinks when the template opened a thought for a plain reply

# keyword -> reply; the first keyword found in the last user message wins.
SCRIPTS: dict[str, str] = {
    "think then call": THINK_OPEN + TOOL_THOUGHT + _call(**WEATHER_CALL),  # no </think>: the call ends the thought
    "think stop": THINK_OPEN + STOP_THOUGHT + THINK_CLOSE + STOP_ANSWER,
    "think twice": THINK_OPEN + TWICE_THOUGHT + THINK_CLOSE + TWICE_ANSWER,
    "think": THINK_OPEN + THOUGHT + THINK_CLOSE + ANSWER,
    "two tools": "I will check both cities. " + _call(**PARIS_CALL) + " And then: " + _call(**OSAKA_CALL) + " Done.",
    "write file": "Saving your notes. " + _call(**WRITE_FILE_CALL) + " Saved.",
    "broken tool": "Trying a call. " + BROKEN_CALL_TEXT + " Did it work?",
    "weather": "Let me check the weather for you." + _call(**WEATHER_CALL),
    "japanese": "こんにちは！今日の東京は晴れです。🗾 桜がきれいに咲いています。",
    "chinese": "你好！服务器每生成一个词元就立刻发送给你，乱码不应该出现。",
    "emoji": "Emoji time: 🚀🫨😊🍜🇫🇷👩‍💻 and done ✅",
    "stop": "Counting: one, two, three. STOP here. This sentence should never reach you.",
    "long": " ".join(f"Sentence {i} of a long reply, 你好 🚀." for i in range(400)),
}
GREETINGS = [
    "Hello! I am a tiny scripted model. I stream one token at a time, so you can watch every byte arrive.",
    "Hi there! This reply comes from mini_vllm's toy model, token by token.",
    "Greetings! Nothing here is learned; every word was written in advance.",
]


def script_for(user_message: str, seed: int = 0) -> str:
    """The scripted reply for a user message (the greeting depends on the message and the seed)."""
    lowered = user_message.lower()
    for keyword, reply in SCRIPTS.items():
        if keyword in lowered:
            return reply
    return random.Random(f"{seed}:{user_message}").choice(GREETINGS)


# A tool's result is the last turn of the prompt: ChatML's "tool" turn, then the assistant's opening.
TOOL_TURN, TURN_END, ASSISTANT_OPENING = "<|im_start|>tool\n", "<|im_end|>\n", "<|im_start|>assistant\n"
TOOL_RESULT_REPLY = "The tool says: {}"
TAIL_IDS = 2048  # how far back the model looks for that turn (never the whole of a huge prompt)


# The same turn as lab-10 renders it: ChatML (Qwen's) puts a tool's result in a user turn, Mistral's v3 in
# [TOOL_RESULTS]{"content": ..., "call_id": ...}[/TOOL_RESULTS] at the end of the prompt.
RESPONSE_OPEN, RESPONSE_CLOSE = "<tool_response>\n", "\n</tool_response>"
MISTRAL_RESULTS, MISTRAL_RESULTS_END = "[TOOL_RESULTS]", "[/TOOL_RESULTS]"


def tool_result(prompt_tail: str) -> str | None:
    """The tool's output when the prompt ends with a tool's turn (and the assistant's opening), else None."""
    if prompt_tail.endswith(MISTRAL_RESULTS_END):
        body = prompt_tail[prompt_tail.rfind(MISTRAL_RESULTS) + len(MISTRAL_RESULTS) : -len(MISTRAL_RESULTS_END)]
        try:
            content = json.loads(body)["content"]
        except (ValueError, KeyError, TypeError):
            return None
        return content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)
    start = prompt_tail.rfind(TOOL_TURN)
    if start < 0:
        start = prompt_tail.rfind("<|im_start|>user\n" + RESPONSE_OPEN)
        if start < 0:
            return None
    turn, end, rest = prompt_tail[start:].rpartition(TURN_END)
    if not end or rest not in (ASSISTANT_OPENING, ASSISTANT_OPENING + THINK_OPEN + "\n"):
        return None
    if turn.startswith(TOOL_TURN):
        return turn[len(TOOL_TURN) :]
    last = turn[turn.rfind(RESPONSE_OPEN) + len(RESPONSE_OPEN) :]
    return last[: -len(RESPONSE_CLOSE)] if last.endswith(RESPONSE_CLOSE) else None


# Scoring mode (lab-08). A request that mentions JSON gets a reply with prose around the object;
# "think json" thinks first; "tree json" answers with a tree, objects inside arrays inside objects
# (lab-09: only a grammar with a stack holds it). These apply to scores() only: reply_ids() keeps the
# scripts above.
WEATHER_JSON: dict[str, Any] = {"city": "東京", "temperature": 18, "unit": "celsius", "note": "🌸 花見 🫨"}
WEATHER_JSON_TEXT = json.dumps(WEATHER_JSON, ensure_ascii=False)
TREE_JSON: dict[str, Any] = {"v": 1, "kids": [{"v": 2, "kids": []}, {"v": 3, "kids": [{"v": 4, "kids": []}]}]}
TREE_JSON_TEXT = json.dumps(TREE_JSON)
JSON_THOUGHT = "\nThey want JSON. 東京 is 18 degrees 🫨.\n"
SCORED_SCRIPTS: dict[str, str] = {
    "think json": THINK_OPEN + JSON_THOUGHT + THINK_CLOSE + "\n\nHere you go: " + WEATHER_JSON_TEXT + " Enjoy!",
    "tree json": "A tree, as JSON: " + TREE_JSON_TEXT + " (each node's kids are nodes too).",
    "json": "Sure! Here is the weather as JSON:\n```json\n" + WEATHER_JSON_TEXT + "\n```\nAnything else?",
}
SCRIPT_BONUS = 2.0  # added to every token that continues the script: above any noise
NOISE = 1.0  # seeded uniform noise in [0, NOISE): which continuation wins, and the order of the rest
CLOSING_BONUS = 1.2  # a token that closes what is open (and EOS): above noise, below the script
NOISE_AHEAD = 64  # steps of noise drawn ahead and kept (1 MiB each on Tekken, inside the decode process's 1 GiB)
# Draws the noise of the steps ahead (``draw_ahead``), made at its first use: one thread, since numpy's fill runs
# without the GIL and a second core is all a 2-core machine has for it.
_DRAWER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="mini_vllm-noise")
OUTPUTS_KEPT = 64  # replies whose output bytes scores() keeps between steps (one per user message)
LOOK_BACK = 24  # how many bytes of its own output the model uses to find its place in the script again


def scored_script(user_message: str, seed: int = 0) -> str:
    """The reply scores() leans toward (the chatty JSON replies, else the usual script)."""
    lowered = user_message.lower()
    return next((reply for key, reply in SCORED_SCRIPTS.items() if key in lowered), script_for(user_message, seed))


def place_in_script(script: bytes, output: bytes) -> int | None:
    """Where the script continues after ``output``: right after it when it is a prefix of the script,
    else after the first occurrence of the longest tail of it (a masked reply skips the prose), else None."""
    if script.startswith(output):
        return len(output)
    # The longest tail found: every shorter tail of a tail that occurs occurs too, so the lengths that occur are
    # 1..k for some k, and k is found by bisection (a few searches of the script, not up to LOOK_BACK of them).
    low, high = 0, min(LOOK_BACK, len(output))  # a tail of ``low`` bytes occurs (0: trivially); find the largest
    while low < high:
        middle = (low + high + 1) // 2
        if output[-middle:] in script:
            low = middle
        else:
            high = middle - 1
    return script.find(output[-low:]) + low if low else None


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
