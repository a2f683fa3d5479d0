"""No answer ships in the test kit: no public function or class of it passes a test of any task.

The release ships ``mini_vllm/testing/`` and each lab's ``test_lab.py`` with no solution beside them.
For each lab, :mod:`instructor.kit_probe` runs the lab's tests on the reference, records every call
they make into a task's function or class, and then puts each public function and class of the
shipped kit in the task's place, with the same calls (arguments by position in the task's own
order, so renaming a parameter is no defence). A candidate that agrees with the reference on a
whole test would pass that test, so the lab's task would not score nothing: it is reported here.

What this cannot see: an answer assembled from several kit functions with code around them, and an
answer whose results differ from the reference's in form but pass tests that check properties (lab-08's
``oracle_bytes`` builds an automaton that accepts the same language with other state numbers: equal
results are what the probe compares, so it does not flag it; running the task's tests with each
candidate in place would). The no-run-of-solution-lines check (``tests/test_release.py``) and the rule
for oracles (a well-kept library, a whole-input formulation that is no incremental answer, recorded
data or a property) cover the rest.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mini_vllm.labs import LABS_DIR, REPO_ROOT

LABS = sorted(p.name[:6] for p in LABS_DIR.iterdir() if p.is_dir() and p.name.startswith("lab-"))
# Answers the probe finds today, each with its reason; the test fails on any other. (lab-05's batch_answer and
# lab-06's rule_split, second implementations of task 1, became properties; lab-08's oracle_bytes, oracle_mask
# and oracle_sample were removed the same way; lab-09's LarkParser, the LALR(1) parser tasks 2-4 run on, answers
# no test of task 1 since each of them holds an ambiguous grammar, for which LALR builds no table.)
KNOWN_ANSWERS: dict[tuple[str, str, str], str] = {
    # Pasted into feed (a kit function in a method's place, since issue 42), a function that returns its text
    # argument as it is passes the one test whose answer is the input unchanged (stop=None: no stops): so does
    # `return text`, which is no part of the task's work.
    ("lab-05", "StopStringChecker", "mini_vllm/testing/graded.py: quoted_if_foreign (pasted into feed)"):
        "an identity: passes only test_no_stop_given_streams_everything_at_once, as `return text` does",
}
# Each lab's probe is its own subprocess (the lab's tests on the reference, then the replay): labs spread over the
# workers. Seconds of CPU on a quiet machine; the limit is for a loaded one.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]


def probe(lab: str, tmp_path: Path) -> dict[str, object]:
    report = tmp_path / f"{lab}.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LAB_", "PYTEST_", "HYPOTHESIS_"))}
    env.update({"LAB_IMPL": "solution", "KIT_PROBE_LAB": lab, "KIT_PROBE_REPORT": str(report)})
    folder = next(LABS_DIR.glob(f"{lab}-*"))
    done = subprocess.run([sys.executable, "-m", "pytest", str(folder), "-q", "-p", "no:xdist",
                           "-p", "no:cacheprovider", "-p", "instructor.kit_probe", "-m", "not control", "--tb=line"],
                          cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert report.exists(), f"the probe wrote no report (pytest exit {done.returncode}):\n{done.stdout[-3000:]}"
    assert done.returncode == 0, f"the reference must pass its own tests while recorded:\n{done.stdout[-3000:]}"
    return json.loads(report.read_text(encoding="utf-8"))


@pytest.mark.parametrize("lab", LABS)
def test_no_function_of_the_shipped_kit_passes_a_test_of_a_task(lab: str, tmp_path: Path) -> None:
    report = probe(lab, tmp_path)
    recorded = report["recorded"]
    assert isinstance(recorded, dict) and any(recorded.values()), (
        f"the probe must see the tests call the tasks' code, or it proves nothing: {recorded}")
    found = {(lab, a["target"], a["candidate"]): a["test"] for a in report["answers"]}  # type: ignore[union-attr]
    new = {key: test for key, test in found.items() if key not in KNOWN_ANSWERS}
    assert not new, "the shipped test kit answers a task (each would pass the test named):\n" + "\n".join(
        f"  {target} <- {candidate}: passes {test}" for (_, target, candidate), test in new.items())


def test_the_probe_finds_an_answer_pasted_into_the_kit(tmp_path: Path) -> None:
    """The probe itself can fail: lab-03's reference function, copied into the test module, is found."""
    from instructor.kit_probe import Recorder, answers

    solution = next(LABS_DIR.glob("lab-03-*")) / "solution.py"
    namespace: dict[str, object] = {"__name__": "pasted"}
    exec(compile(solution.read_text(encoding="utf-8"), str(solution), "exec"), namespace)
    recorder = Recorder("lab-03")
    recorder.test = "test_lengths"
    wrapped = recorder.wrap_function("utf8_expected_len", namespace["utf8_expected_len"])
    for byte in (0x41, 0xC3, 0xE2, 0xF0, 0x80, 0xFF):
        wrapped(byte)
    found = answers(recorder, {"pasted: utf8_expected_len": namespace["utf8_expected_len"], "len": len})
    assert [a["candidate"] for a in found] == ["pasted: utf8_expected_len"], found


def test_a_kit_class_that_hands_the_work_to_the_lab_is_no_answer() -> None:
    """In the release a wrapper around the lab's own class (lab-02's CheckedPipeline) reaches the student's
    code: during the replay it reaches the blank starter, so the reference it would delegate to is not found."""
    from instructor.kit_probe import Recorder, answers, blank_tasks
    from mini_vllm.labs import load_lab

    reference = load_lab("lab-03", "solution")

    def delegates(byte: int) -> int:
        return int(reference.utf8_expected_len(byte))

    recorder = Recorder("lab-03")
    recorder.test = "test_lengths"
    wrapped = recorder.wrap_function("utf8_expected_len", reference.utf8_expected_len)
    for byte in (0x41, 0xC3, 0xE2, 0xF0, 0x80, 0xFF):
        wrapped(byte)
    assert [a["candidate"] for a in answers(recorder, {"delegates": delegates})] == ["delegates"]
    with blank_tasks():
        assert answers(recorder, {"delegates": delegates}) == []
    assert reference.utf8_expected_len(0xF0) == 4, "the reference's names are back after the replay"


def test_a_kit_function_that_hangs_is_dropped_not_waited_on() -> None:
    import time

    from instructor.kit_probe import CALL_LIMIT_S, Recorder, answers

    recorder = Recorder("lab-03")
    for test in ("test_a", "test_b", "test_c"):
        recorder.test = test
        wrapped = recorder.wrap_function("utf8_expected_len", lambda byte: 1)
        for byte in (0x41, 0x42, 0x43):
            wrapped(byte)

    def hangs(byte: int) -> int:
        while True:
            pass

    started = time.monotonic()
    assert answers(recorder, {"hangs": hangs}) == []
    assert time.monotonic() - started < 2 * CALL_LIMIT_S + 1, "one time-out drops the candidate for the target"


def test_the_probe_finds_a_kit_function_pasted_into_a_task_class() -> None:
    """lab-09's old ``lexer_split(grammar, vocab, state)`` earned task 4 pasted into ``LexerCache.split`` with a
    dict around it: a kit function is tried in each method of a task's class, given the constructor's arguments
    first. Here a function with that shape (it hands the work to the reference) is found."""
    import random

    from instructor.kit_probe import Recorder, answers
    from mini_vllm.grammars.stack_grammar import JSON_OBJECT, schema_to_grammar
    from mini_vllm.labs import load_lab
    from mini_vllm.labtypes.lab08 import token_trie
    from mini_vllm.testing.stack import lexer_state_after
    from mini_vllm.testing.structured import family_vocabulary

    reference = load_lab("lab-09", "solution")
    grammar, vocab = schema_to_grammar(JSON_OBJECT), family_vocabulary("byte")
    recorder = Recorder("lab-09")
    recorder.test = "test_split"
    cache = reference.LexerCache
    originals = {name: vars(cache)[name] for name in ("__init__", "split")}
    try:
        for name, member in originals.items():
            setattr(cache, name, recorder.wrap_method("LexerCache", name, member))
        split = reference.LexerCache(grammar, vocab, token_trie(vocab))
        string = grammar.lexeme_id("STRING")
        for data in (b'"', b'"ab', b'"a\\'):
            split.split(lexer_state_after(grammar, frozenset({string}), data))
    finally:
        for name, member in originals.items():
            setattr(cache, name, member)

    def pasted(grammar: object, vocab: object, trie: object, state: object) -> object:
        return reference.LexerCache(grammar, vocab, trie).split(state)

    def unrelated(grammar: object, vocab: object, trie: object, state: object) -> object:
        return random.random()

    found = answers(recorder, {"kit: pasted": pasted, "kit: unrelated": unrelated})
    assert [a["candidate"] for a in found] == ["kit: pasted (pasted into split)"], found
