"""Sampling parameters: what a request asks of the engine, checked before any work starts."""

from __future__ import annotations

from dataclasses import dataclass, field


class InvalidRequest(ValueError):
    """A request the server must refuse with a 400. ``param`` names the offending field."""

    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.param = param


@dataclass(frozen=True)
class SamplingParams:
    """The subset of OpenAI's request knobs the teaching engine honours."""

    max_tokens: int = 256
    stop: tuple[str, ...] = field(default_factory=tuple)
    include_stop_str_in_output: bool = False
    skip_special_tokens: bool = True
    n: int = 1

    def __post_init__(self) -> None:
        if isinstance(self.max_tokens, bool) or not isinstance(self.max_tokens, int) or self.max_tokens < 1:
            raise InvalidRequest(f"max_tokens must be an integer >= 1, got {self.max_tokens!r}", "max_tokens")
        if isinstance(self.n, bool) or self.n != 1:
            raise InvalidRequest(f"only n=1 is supported, got n={self.n!r}", "n")
        if not isinstance(self.stop, tuple) or not all(isinstance(s, str) for s in self.stop):
            raise InvalidRequest("stop must be a string or a list of strings", "stop")
        if any(s == "" for s in self.stop):
            raise InvalidRequest("stop strings must not be empty (an empty stop would match at once)", "stop")
        for name in ("include_stop_str_in_output", "skip_special_tokens"):
            if not isinstance(getattr(self, name), bool):
                raise InvalidRequest(f"{name} must be true or false", name)
