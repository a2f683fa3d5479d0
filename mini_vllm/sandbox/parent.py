"""The trusted end of the channel: every request has a budget and a checked answer, and serving the child is
bounded.

:class:`ParentPeer` asks the child only what the lab's API has (:mod:`.declared`), under the call's CPU budget
(:mod:`.budget`), and serves the child's own requests (a lent object's method, a reference stage) under what is
left of that budget and of the test's. :class:`ReferenceLender` says what the child may ask of this side.
"""

from __future__ import annotations

import time
from typing import Any, Protocol

from mini_vllm.sandbox import budget as budgets
from mini_vllm.sandbox.budget import ALARM, Budget, Clock, Meter
from mini_vllm.sandbox.declared import NotAsDeclared, check, is_class, is_method, returns, what
from mini_vllm.sandbox.failures import CallInterrupted, TooMuchData
from mini_vllm.sandbox.lenders import StrictLender
from mini_vllm.sandbox.peer import PARENT, CallTimedOut, ChannelClosed, Peer, ServingStopped
from mini_vllm.sandbox.policy import (
    BYTES_PER_TEST,
    FIRST_LOAD_BUDGET_S,
    INTERRUPT_GRACE_S,
    RECORDED_FROM_S,
    SERVE_SLACK_S,
    SERVED_PER_TEST_S,
)
from mini_vllm.sandbox.proxies import Remote, RemoteMethod


class Worker(Protocol):
    """What the parent's side of a channel reads of the worker that owns it (mini_vllm.sandbox.worker.Worker).

    Written here as a protocol, so that imports run one way: the worker opens the channel, never the reverse.
    """

    number: str
    served: set[str]
    load_reference: Any
    meter: Meter | None
    overrun: float | None
    stopped_at: Budget | None
    warm: tuple[str, ...]
    last_cpu_s: float | None
    test_bytes: int
    test_served_s: float

    def interrupt(self) -> None: ...

    def label_of(self, op: str, args: tuple[Any, ...]) -> str: ...

    def timed(self, label: str, exchange: Any, calls: int = 1) -> Any: ...


NO_ANSWER = ("a reference to an object of your code answers no test's question: the tests call the lab's declared "
             "methods on it, and what they return crosses as plain data")
GRADER_PATHS = ("__ready__", "__setup__")  # the grader's own requests to the child, not the lab's API
ASKS_NOTHING = ("setattr", "repr", "str")  # a test sets an attribute, or shows the object in a message


class Gate:
    """What the trusted side may ask one lab's child, and what each answer must be, by the lab's API.

    Objects of the child that the lab's constructors return are the only references a test holds; each
    is known here by the class it was constructed as (never by the name the child gives it).
    """

    def __init__(self, number: str) -> None:
        self.number = number
        self.kinds: dict[int, str] = {}  # object id in the child -> the lab's class it was constructed as

    def before(self, op: str, args: tuple[Any, ...]) -> str | None:
        """The API entry the answer must match (``"class X"`` for a constructor), or raise: not to be asked."""
        if op == "call_path":
            path = args[0]
            if len(path) == 1 and path[0] in GRADER_PATHS:
                return None
            qualname = ".".join(path)
            if len(path) == 1 and is_class(self.number, qualname):
                return f"class {qualname}"
        elif op in ("call", "map", "getattr"):
            kind, name = self.kinds.get(args[0]), args[1]
            if kind is None or not isinstance(name, str):
                raise NotAsDeclared(NO_ANSWER)
            qualname = f"{kind}.{name}"
        elif op in ASKS_NOTHING:
            return None
        else:  # iter, bool, contains: a question asked of the object itself
            raise NotAsDeclared(NO_ANSWER)
        if returns(self.number, qualname) is None:
            raise NotAsDeclared(f"lab-{self.number}: {qualname} is not part of the lab's API, so no test asks it "
                                f"({NO_ANSWER})")
        return qualname

    def after(self, expected: str | None, op: str, result: Any) -> Any:
        """``result`` if it is what ``expected`` states; a constructed object is remembered as its class."""
        if expected is None:
            return result
        if expected.startswith("class "):
            if not isinstance(result, Remote):
                raise NotAsDeclared(f"constructing {expected[6:]} must give an object of that class, not "
                                    f"{what(result)}")
            self.kinds[result._sandbox_id] = expected[6:]
            return result
        if op == "map":
            return [check(self.number, expected, item) for item in result]
        return check(self.number, expected, result)


class ParentPeer(Peer):
    """The trusted end: every request has a budget, and a hang or a death ends the child."""

    def __init__(self, worker: Worker, read_fd: int, write_fd: int) -> None:
        from mini_vllm.tokenizers.families import load_tokenizer_cached

        super().__init__(PARENT, read_fd, write_fd, ReferenceLender(worker), load_tokenizer_cached)
        self.worker = worker
        self.gate = Gate(worker.number)  # what the tests may ask this child, and what each answer must be
        self._counted = 0  # of received_bytes, what was added to the worker's count for the test
        self._call: tuple[Budget, Clock] | None = None  # the call being waited for: its budget and clock
        self._serving = False  # a request of the child's is being served (requests can nest)
        self._families_before: set[str] = set()  # the families sent to this child, as of the last new one

    def request(self, op: str, *args: Any) -> Any:
        """One question to the child, asked only if the lab's API has it, its answer checked against the API."""
        expected = self.gate.before(op, args)
        if op == "getattr" and expected is not None and is_method(self.worker.number, expected):
            proxy = self._proxies.get(args[0])
            if proxy is not None:  # a declared method: called by name, never looked up in the child
                return RemoteMethod(proxy, args[1])
        label = self.worker.label_of(op, args)
        calls = len(args[2]) if op == "map" else 1
        result = self.worker.timed(label, lambda budget: self._timed_exchange(op, args, budget), calls)
        return self.gate.after(expected, op, result)

    def receive(self, deadline: float | None) -> list[Any]:
        """One message, counted against what one test may receive (a flood fails the test, not the grader)."""
        message = super().receive(deadline)
        worker = self.worker
        worker.test_bytes += self.received_bytes - self._counted
        self._counted = self.received_bytes
        if worker.test_bytes > BYTES_PER_TEST:
            self.closed = True
            raise TooMuchData(f"your code sent the tests more than {BYTES_PER_TEST // 2**20} MiB during this test")
        return message

    def _timed_exchange(self, op: str, args: tuple[Any, ...], budget: Budget) -> Any:
        with self._lock:
            if self.closed:
                raise ChannelClosed("the channel is closed")
            meter = self.worker.meter
            if meter is not None:
                meter.start()
            clock = Clock(meter)
            sent = self.codec.families_sent
            before = len(sent)
            number = self._send_request(op, args)
            # The child builds a real vocabulary it has not built yet: that is not the call's cost. One it loaded as
            # it started (its ``warm`` ones, before it answered "ready") adds nothing, nor does a course tokenizer.
            allowance = 0.0
            if len(sent) > before:
                built = sent - self._families_before - set(self.worker.warm)
                allowance = max((FIRST_LOAD_BUDGET_S.get(family, 0.0) for family in built), default=0.0)
                self._families_before = set(sent)
            first_load = allowance > 0
            if first_load:
                budget = budget.plus(allowance)
            deadline = clock.started + budgets.SLICE_S
            outer, self._call = self._call, (budget, clock)
            try:
                return self._wait(number, budget, clock, deadline, first_load)
            finally:
                self._call = outer

    def _wait(self, number: int, budget: Budget, clock: Clock, deadline: float, first_load: bool) -> Any:
        looks = 0
        interrupted = False
        while True:
            try:
                result = self._await(number, deadline)
            except CallTimedOut:
                if interrupted:
                    raise
                looks += 1
                cpu = self._cpu_used(clock, rescan=looks % 5 == 1)
                if cpu <= budget.cpu_s and clock.wall_s() <= budget.wall_s:
                    deadline = time.monotonic() + budgets.SLICE_S  # within budget: keep waiting
                    continue
                self.worker.overrun, self.worker.stopped_at = cpu, budget
                interrupted = True  # ask the child to stop the call; kill it if it does not
                self.worker.interrupt()
                deadline = time.monotonic() + INTERRUPT_GRACE_S
                continue
            except ServingStopped:  # the child waits for a reply that will not come: it is ended, not interrupted
                raise
            except BaseException:
                if interrupted:
                    raise CallInterrupted() from None
                raise
            if interrupted:
                raise CallInterrupted()
            slow = time.monotonic() - clock.started > RECORDED_FROM_S and not first_load
            self.worker.last_cpu_s = self._cpu_used(clock, rescan=False) if slow else None
            return result

    def serve(self, message: list[Any]) -> None:
        """Serve one request of the child's, under what is left of its call's budget and of the test's bound.

        The CPU this thread spends serving counts against the call (``Clock.served_s``), and an alarm
        (:class:`~mini_vllm.sandbox.budget.CpuAlarm`) stops a request that would outlast what is left,
        so the trusted side never works for graded code without a budget, however large the request.
        """
        if self._serving:  # a request made while serving another: the outer one's alarm and count cover it
            super().serve(message)
            return
        worker = self.worker
        left, whole_test = SERVED_PER_TEST_S - worker.test_served_s, True
        if self._call is not None:
            budget, clock = self._call
            for_call = budget.cpu_s - self._cpu_used(clock, rescan=False)
            if for_call < left:
                left, whole_test = for_call, False
        if left <= 0:
            raise ServingStopped(self._stopped(whole_test), whole_test)
        self._serving = True
        started = time.thread_time()
        armed = ALARM.arm(left + SERVE_SLACK_S, lambda: ServingStopped(self._stopped(whole_test), whole_test))
        try:
            super().serve(message)
        finally:
            if armed:
                ALARM.disarm()
            self._serving = False
            worker.test_served_s += time.thread_time() - started
        if worker.test_served_s > SERVED_PER_TEST_S:
            raise ServingStopped(self._stopped(True), True)

    def _stopped(self, whole_test: bool) -> str:
        if whole_test:
            return (f"your code had the tests' side serve it (a served decode or step, a reference stage) for more "
                    f"than {SERVED_PER_TEST_S:g} s of CPU in this test")
        return "used more than its budget of CPU time, counting what the tests' side spent serving its requests"

    def _cpu_used(self, clock: Clock, rescan: bool) -> float:
        """CPU seconds of the call so far: the child's tree, and this thread serving it (wall time where unmeasured)."""
        meter = self.worker.meter
        child = meter.used_s(rescan) if meter is not None else time.monotonic() - clock.started
        return child + clock.served_s()


class ReferenceLender(StrictLender):
    """What the child may ask of the trusted side: lent objects' public methods, and the reference labs."""

    def __init__(self, worker: Worker) -> None:
        self.worker = worker

    def call_path(self, path: list[str], args: list[Any], kwargs: dict[str, Any]) -> Any:
        if len(path) != 2 or not all(isinstance(p, str) for p in path) or path[0] not in self.worker.served:
            raise PermissionError("the reference labs are not available to graded code")
        number, name = path
        if name.startswith("_"):
            raise PermissionError(f"lab-{number}.{name} is not served to graded code")
        module = self.worker.load_reference(number)
        target = getattr(module, name, None)
        if not callable(target) or getattr(target, "__module__", None) != module.__name__:
            raise AttributeError(f"lab-{number} has no public class or function {name!r}")
        return target(*args, **kwargs)
