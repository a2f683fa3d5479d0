"""What the toy model (:mod:`mini_vllm.toy_model`) says: its scripted replies, chosen by keyword.

Each reply shows one case a server must get right: multilingual text, emoji, a stop string, one or
two tool calls, a call with a long argument, a malformed call, a long reply to interrupt, a reasoning
model's ``<think>`` replies. A prompt that ends with a tool's result gets a reply quoting it
(:func:`tool_result`), so an agent loop can finish. The scoring mode (lab-08, lab-09) leans toward
chatty JSON replies (:data:`SCORED_SCRIPTS`) and finds its place in them again after a mask bent the
reply (:func:`place_in_script`).
"""

from __future__ import annotations

import json
import random
from typing import Any


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
