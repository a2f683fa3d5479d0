"""How a call into graded code can end other than by returning: each fails the test it happened in, not the lab."""

from __future__ import annotations

from mini_vllm.sandbox.peer import CallTimedOut
from mini_vllm.sandbox.wire import WireError


class SandboxFailure(BaseException):
    """Graded code did something that ends the call: it hung, it killed its process, it does not import.

    A BaseException, so neither a test's ``except Exception`` nor hypothesis (which would shrink
    a timeout by timing out again, many times) swallows it: the test fails at once, with this message.
    """


class CallTimeout(SandboxFailure):
    """A call ran out of its budget. ``retry``: whether its test may run once more in a fresh child."""

    def __init__(self, message: str, label: str = "", retry: bool = True) -> None:
        super().__init__(message)
        self.label = label
        self.retry = retry


class CallInterrupted(CallTimedOut):
    """Over budget, and stopped by the interrupt: the child answered, so it may go on serving."""


class ChildDied(SandboxFailure):
    pass


class TooMuchData(WireError):
    """The child sent more than one test may receive."""


class LabDoesNotImport(SandboxFailure):
    pass
