"""A deterministic toy "model": scripted replies, streamed one token id at a time.

The reply is chosen from keywords in the last user message, so a test (or a person with
curl) can ask for exactly the case it wants to see: multilingual text, emoji, a stop
string, one or two tool calls, a call with a long argument (a file written through a tool),
a malformed call, or a long reply to interrupt.
"""

from __future__ import annotations

import json
import random
from typing import Any

from mini_vllm.tokenizer_base import Tokenizer


def _call(name: str, arguments: dict[str, Any]) -> str:
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False) + "\n</tool_call>"


WEATHER_CALL: dict[str, Any] = {
    "name": "get_weather", "arguments": {"city": "東京", "unit": "celsius", "note": "🌸 花見"},
}
PARIS_CALL: dict[str, Any] = {"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}
OSAKA_CALL: dict[str, Any] = {"name": "book_table", "arguments": {"city": "大阪", "people": 2, "mood": "🫨🍜"}}
# A file written through a tool: several kB of arguments, so a client sees them arrive in many fragments.
WRITE_FILE_CALL: dict[str, Any] = {"name": "write_file", "arguments": {
    "path": "notes/旅行.md",
    "content": "".join(f'{i:03d}. 東京 → 大阪 🚄 "day {i}" {{ok}} 花見 🌸 \\ done ✅\n' for i in range(60)),
    "overwrite": True,
}}
# The model forgets the envelope's closing brace: the server must say so, not drop the call.
BROKEN_CALL_TEXT = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}\n</tool_call>'

# keyword -> reply; the first keyword found in the last user message wins.
SCRIPTS: dict[str, str] = {
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


class ToyModel:
    """Turns a user message into the token ids of its scripted reply, ending with EOS."""

    def __init__(self, tokenizer: Tokenizer, seed: int = 0) -> None:
        self.tokenizer = tokenizer
        self.seed = seed

    def reply_ids(self, user_message: str) -> list[int]:
        return [*self.tokenizer.encode(script_for(user_message, self.seed)), self.tokenizer.eos_token_id]
