"""The trusted side's bounds, checked piece by piece (the whole gradings are in test_budgets_under_load.py).

- a call's budget is CPU time as the kernel counts it: a sleeping or starved process spends none;
- budgets come from grading.toml per lab and never shrink;
- a lab composes only the reference stages the spec names (lab-02: 01, 03, 04, 05, 06);
- a message over the limit is refused where it is read, before it is buffered;
- what the trusted side does for graded code is stopped at its CPU budget, even inside one request;
- student text on its way to a scorecard or results.json loses its terminal escapes and control
  characters, is cut to a length, and an exception raised by graded code is quoted as such.
"""

from __future__ import annotations

import os
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from mini_vllm.labs import COMPOSED_STAGES, LABS_DIR, lab_number
from mini_vllm.sandbox import budget, remote
from mini_vllm.sandbox.lenders import Lender
from mini_vllm.sandbox.peer import MAX_MESSAGE, PARENT, Peer
from mini_vllm.sandbox.wire import WireError, rebuild_error
from mini_vllm.testing.gradescope import MAX_TEST_OUTPUT, printable
from mini_vllm.testing.grading import quoted_if_foreign
from mini_vllm.testing.policy import PolicyError, load_policy, parse_policy

pytestmark = pytest.mark.skipif(not budget.measurable(), reason="CPU time is read from /proc (Linux)")

SPIN = ("import time\nend = time.process_time() + {s}\nwhile time.process_time() < end: pass\n"
        "print('done', flush=True)\n")


def run_metered(code: str) -> tuple[float, float]:
    """(CPU seconds the meter saw, wall seconds) for a Python process running ``code``."""
    process = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    try:
        meter = budget.Meter(process.pid, None)
        meter.start()
        started = time.monotonic()
        assert process.stdout is not None
        process.stdout.readline()
        cpu = meter.used_s()
        return cpu, time.monotonic() - started
    finally:
        process.kill()
        process.wait()


def test_the_meter_counts_cpu_time_not_wall_time() -> None:
    spun, _ = run_metered(SPIN.format(s=0.3))
    slept, wall = run_metered("import time\ntime.sleep(0.4)\nprint('done', flush=True)\n")
    assert 0.25 <= spun <= 0.6, f"a process that computes for 0.3 s of CPU is counted {spun:.2f} s"
    assert slept < 0.1 <= wall, f"a process that sleeps {wall:.2f} s is counted {slept:.2f} s of CPU"


def test_the_meter_counts_what_a_child_forked_in_a_session_of_its_own() -> None:
    code = ("import os, time\nif os.fork() == 0:\n    os.setsid()\n" + "".join(
        "    " + line + "\n" for line in SPIN.format(s=0.3).splitlines()[:-1]) + "    os._exit(0)\n"
            "os.wait()\nprint('done', flush=True)\n")
    spun, _ = run_metered(code)
    assert spun >= 0.25, f"0.3 s of CPU in a forked grandchild (own session) is counted {spun:.2f} s"


def test_a_stopped_process_costs_no_cpu_and_its_wait_for_a_cpu_is_not_wall_time() -> None:
    process = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        meter = budget.Meter(process.pid, None)
        os.kill(process.pid, signal.SIGSTOP)  # as if a busy machine never scheduled it
        meter.start()
        time.sleep(0.3)
        assert meter.used_s() < 0.05
    finally:
        process.kill()
        process.wait()


class Stopped(BaseException):
    pass


def test_the_cpu_alarm_stops_the_trusted_side_inside_a_long_request() -> None:
    """What the trusted side does for graded code (a served request, a reference stage) is stopped at its budget
    of CPU seconds, even in the middle of one request; disarmed, it never fires."""
    started = time.process_time()
    with pytest.raises(Stopped):
        assert budget.ALARM.arm(0.2, Stopped)
        try:
            while time.process_time() < started + 5:  # a served request that would run for 5 s
                pass
        finally:
            budget.ALARM.disarm()
    # The upper bound is the rule (stopped inside the 5 s request). The lower one only says the alarm did not
    # ring at once: the kernel's process-wide CPU timer has rung after 0.12 and 0.147 s of process_time() here
    # in make test beside other workers, while alone, even beside two spinning threads, it rings at 0.20-0.22 s.
    assert 0.05 < time.process_time() - started < 1.5, "stopped at its budget, not at the request's end"
    budget.ALARM.arm(0.05, Stopped)
    budget.ALARM.disarm()
    end = time.process_time() + 0.2
    while time.process_time() < end:  # nothing rings once disarmed
        pass


def test_each_lab_has_its_budget_in_grading_toml_and_the_override_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    policy = load_policy()
    numbers = sorted(lab_number(p.name) for p in LABS_DIR.iterdir() if p.is_dir() and p.name.startswith("lab-"))
    budgets = {f"lab-{n}": policy.budget_of(n) for n in numbers}  # every lab folder: a new lab needs one too
    assert all(policy.lab(lab).call_budget_s is not None for lab in budgets), (
        f"every lab's budget is set from its reference's measured CPU time: {budgets}")
    monkeypatch.delenv("LAB_CALL_BUDGET_S", raising=False)
    assert remote.call_budget("08").cpu_s == policy.budget_of("08")
    assert remote.call_budget("08").wall_s == budget.WALL_FACTOR * policy.budget_of("08")
    monkeypatch.setenv("LAB_CALL_BUDGET_S", "0.5")
    assert remote.call_budget("08").cpu_s == 0.5
    with pytest.raises(PolicyError, match=r"\[labs.lab-03\] call_budget_s"):
        parse_policy({"tests_version": "t", "labs": {"lab-03": {"call_budget_s": -1}}})


def test_a_budget_never_shrinks_after_a_timeout() -> None:
    worker = remote.Worker("03", {}, {}, set(), False)
    before = worker.budget_for("StreamingDetokenizer.feed")

    def hangs(_: budget.Budget) -> None:
        raise remote.CallInterrupted()

    with pytest.raises(remote.CallTimeout) as first:
        worker.timed("StreamingDetokenizer.feed", hangs)
    assert first.value.retry, "a first timeout is retried in a fresh child before its test fails"
    assert worker.budget_for("StreamingDetokenizer.feed") == before
    worker.confirmed.add("StreamingDetokenizer.feed")
    with pytest.raises(remote.CallTimeout) as second:
        worker.timed("StreamingDetokenizer.feed", hangs)
    assert not second.value.retry, "once a call ran out in a test and its retry, its code does hang"
    assert worker.budget_for("StreamingDetokenizer.feed") == before


def composed(number: str, compose: str, chosen: str, monkeypatch: pytest.MonkeyPatch) -> remote.Worker:
    """The worker open_lab makes for lab ``number`` when every lab's chosen file is ``chosen``."""
    monkeypatch.setenv("LAB_COMPOSE", compose)
    monkeypatch.delenv("LAB_SANDBOX_TRUSTED", raising=False)
    monkeypatch.setattr(remote, "_source", lambda path: [str(path), ""])
    labs = ["01", "02", "03", "04", "05", "06", "07", "08"]
    lab = remote.open_lab(number, Path(f"{number}/{chosen}.py"), lambda n: Path(f"{n}/{chosen}.py"), labs,
                          lambda n: Path(f"{n}/solution.py"), None, stages=COMPOSED_STAGES.get(number, ()))
    remote._workers.remove(lab._worker)
    return lab._worker


def test_composition_serves_only_the_stages_the_spec_names(monkeypatch: pytest.MonkeyPatch) -> None:
    assert COMPOSED_STAGES == {"02": ("01", "03", "04", "05", "06")}, "lab-07 composes recorded data, not code"
    autograder_02 = composed("02", "reference", "starter", monkeypatch)
    assert autograder_02.served == {"01", "03", "04", "05", "06"}
    assert set(autograder_02.sources) == {"02", "07", "08"}, "any other lab is the student's own file"
    autograder_03 = composed("03", "reference", "starter", monkeypatch)
    assert autograder_03.served == set(), "lab-03 composes nothing: no reference is served to it (lab-04's push)"
    assert "04" in autograder_03.sources, "its load_lab('lab-04') gets the student's own lab-04"
    reference_03 = composed("03", "own", "solution", monkeypatch)
    assert reference_03.served == set() and set(reference_03.sources) == {"03"}, (
        "grading the references: lab-03's child gets no other lab at all")
    own_02 = composed("02", "own", "starter", monkeypatch)
    assert own_02.served == set() and set(own_02.sources) >= {"01", "03", "04", "05", "06"}
    for compose in ("own", "reference"):
        reference_02 = composed("02", compose, "solution", monkeypatch)
        assert reference_02.served == set() and set(reference_02.sources) == {"01", "02", "03", "04", "05", "06"}, (
            "grading the reference (no student code in its child): its reference stages run beside it, as a "
            "student's own stages do, and no other lab is there")
    monkeypatch.setattr(remote, "_source", lambda path: [str(path), f"# {path}"])
    monkeypatch.setenv("LAB_SANDBOX_TRUSTED", "1")
    variant_02 = remote.open_lab("02", Path("02/variant.py"), lambda n: Path(f"{n}/solution.py"),
                                 ["01", "02", "03", "04", "05", "06"], lambda n: Path(f"{n}/solution.py"), None,
                                 stages=COMPOSED_STAGES["02"])._worker
    remote._workers.remove(variant_02)
    assert variant_02.served == set(), "an instructor's variant (trusted): its reference stages run in its child"
    assert variant_02.sources["01"] == ["01/solution.py", "# 01/solution.py"], "shipped as the reference's text"


def pipe_peers() -> tuple[Peer, int]:
    read_fd, write_fd = os.pipe()
    peer = Peer(PARENT, read_fd, os.open(os.devnull, os.O_WRONLY), Lender(), lambda name: None)
    return peer, write_fd


def test_a_message_over_the_limit_is_refused_from_its_header() -> None:
    peer, write_fd = pipe_peers()
    try:
        os.write(write_fd, struct.pack("<I", 240 * 2**20) + b"x" * 4096)  # the rest never needs to arrive
        with pytest.raises(WireError, match="over the"):
            peer.receive(time.monotonic() + 5)
        assert len(peer._buffer) <= 4096 + 4, "nothing past the first read is kept"
        assert 2**20 <= MAX_MESSAGE <= 32 * 2**20, "a few MiB: far above an honest reply, far below a runaway"
        with pytest.raises(WireError, match="over the"):
            peer._write(b"x" * (MAX_MESSAGE + 1))  # nor is one sent
    finally:
        os.close(write_fd)


def test_student_text_loses_escapes_and_control_characters_and_is_cut() -> None:
    text = "\x1b[2J\x1b[31mred\x1b[0m \x1b]0;title\x07bell\x07 \rback\x00\u202eevil\ttab\nnext" + "x" * 50_000
    clean = printable(text)
    assert "red bell back" in clean and "evil\ttab\nnext" in clean
    assert not any(ord(c) < 32 and c not in "\n\t" for c in clean) and "\x1b" not in clean and "\u202e" not in clean
    assert len(clean) < MAX_TEST_OUTPUT + 100 and clean.endswith("more characters)")


def test_an_exception_from_graded_code_is_quoted() -> None:
    error = rebuild_error("builtins", "ValueError", ["bad\nTOTAL 100 / 100"], {}, "bad\nTOTAL 100 / 100",
                          "Traceback in the graded code (most recent call last):\n  File \"starter.py\"")
    details = quoted_if_foreign(error, f"ValueError: {error}\n{error.sandbox_traceback}")  # type: ignore[attr-defined]
    lines = details.splitlines()
    assert lines[0] == "your code raised ValueError: bad", details
    assert lines[1] == "  | TOTAL 100 / 100", "a further line of its message is quoted, never a line of its own"
    assert not any(line.startswith("TOTAL") for line in lines)
    assert details.endswith('File "starter.py"'), "the student's frames follow as they were"
    own = SimpleNamespace()  # the tests' own assertion: left as it is
    assert quoted_if_foreign(own, "AssertionError: rule") == "AssertionError: rule"  # type: ignore[arg-type]
