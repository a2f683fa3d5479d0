"""The grader's own tests: dishonest submissions earn nothing, honest ones lose nothing.

Each file in ``instructor/dishonest/`` is a lab-03 submission that implements no task and attacks the
grade instead (see that folder's README). They are graded as ``make lab-03`` grades a student's
file: pytest with the grading plugin, ``LAB_SANDBOX=1``. A batch of them runs in one grading
process, the honest reference last, so an attack that left anything behind (a patched module, a
changed file, a stray process) would show in the reference's grade after it.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import socket
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from instructor.contract import LabRun, looping, run_jobs, run_lab_tests, task_of
from instructor.variants import Job
from mini_vllm.labs import LABS_DIR, REPO_ROOT, impl_path
from mini_vllm.sandbox.isolation import BWRAP, probe

pytestmark = [pytest.mark.contract, pytest.mark.timeout(1200)]

LAB_03 = next(LABS_DIR.glob("lab-03-*"))
TAG = uuid.uuid4().hex  # marks this run's grading children, so a leftover one can be found
DISHONEST = REPO_ROOT / "instructor" / "dishonest"
# Grouped so that each batch's grading process runs once, on one worker (see test_course_contract).
BATCHES = {
    "tampering": ["patches_pytest", "patches_the_grader", "forges_results", "patches_conftest", "writes_the_engine",
                  "skips_every_test", "escapes_the_scorecard"],
    "peeking": ["loads_the_reference", "reads_the_reference", "imports_the_oracle", "reads_another_lab",
                "opens_a_connection", "borrows_another_labs_reference"],
    "runaway": ["exits_in_feed", "hangs_in_feed", "allocates_without_bound", "forks_without_bound",
                "sends_huge_replies"],
}
# What a submission's grading adds to the environment: the autograder's LAB_COMPOSE=reference, under which
# a lab that composes nothing must still get no other lab's reference.
EXTRA_ENV = {"borrows_another_labs_reference": {"LAB_COMPOSE": "reference"}}
WATCHED = [REPO_ROOT / "conftest.py", REPO_ROOT / "mini_vllm" / "labs.py",
           REPO_ROOT / "mini_vllm" / "testing" / "grading.py"]


def digest(paths: list[Path]) -> dict[str, str]:
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in paths}


class Listener:
    """A server on 127.0.0.1 that records whether anybody reached it."""

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.server.settimeout(0.2)
        self.port = self.server.getsockname()[1]
        self.reached = False
        self.stopping = False
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.stopping:
            try:
                connection, _ = self.server.accept()
            except OSError:
                continue
            self.reached = True
            connection.close()

    def close(self) -> None:
        self.stopping = True
        self.thread.join()
        self.server.close()


@pytest.fixture(scope="module")
def listener() -> Iterator[Listener]:
    running = Listener()
    yield running
    running.close()


graded_batches: dict[str, tuple[dict[str, LabRun], dict[str, str], dict[str, str]]] = {}


def graded(batch: str, listener: Listener) -> tuple[dict[str, LabRun], dict[str, str], dict[str, str]]:
    """Grade a batch, then the reference, in one process; and the watched files before and after."""
    if batch not in graded_batches:
        before = digest(WATCHED)
        env = {"LAB_SANDBOX": "1", "DISHONEST_PORT": str(listener.port), "LAB_SANDBOX_TAG": f"dishonest-{TAG}"}
        jobs = [Job(name, {**env, **EXTRA_ENV.get(name, {}), "LAB_IMPL_03": str(DISHONEST / f"{name}.py")})
                for name in BATCHES[batch]]
        jobs.append(Job("reference-after", {**env, "LAB_IMPL_03": str(impl_path("lab-03", "solution"))}))
        runs = run_jobs(LAB_03, jobs, timeout=600)  # the bound on the whole grading: it must end by itself
        graded_batches[batch] = (runs, before, digest(WATCHED))
    return graded_batches[batch]


def batch_param(batch: str) -> list[object]:
    return [pytest.param(batch, name, id=name, marks=[pytest.mark.xdist_group(f"dishonest-{batch}")])
            for name in BATCHES[batch]]


@pytest.mark.slow  # a dishonest submission graded through the sandbox: make check
@pytest.mark.parametrize(("batch", "name"), [p for b in BATCHES for p in batch_param(b)])
def test_a_dishonest_submission_earns_nothing(batch: str, name: str, listener: Listener) -> None:
    runs, before, after = graded(batch, listener)
    run = runs[name]
    honest = runs["reference-after"].results
    assert run.results, f"{name}: the trusted side must always write the results:\n{run.output[-1500:]}"
    assert run.results["score"] == 0, (
        f"{name} implements no task, so it must earn nothing; it got {run.results['score']}:\n"
        + "\n".join(f"  {t['name']}: {t['score']}" for t in run.tests if t["score"]))
    assert run.results["extra_data"]["max_score"] == honest["extra_data"]["max_score"] > 0, (
        f"{name}: the maximum is the course's ({honest['extra_data']['max_score']}), whatever the submission did: "
        f"{run.results['extra_data']['max_score']}")
    assert len(run.tests) == len(runs["reference-after"].tests), f"{name}: every graded test is a result"
    assert before == after, f"{name}: the course's files changed during the grading: {before} != {after}"
    assert honest["score"] == honest["extra_data"]["max_score"], (
        f"the reference graded after {batch} lost points, so an attack left something behind: {honest}")


@pytest.mark.slow  # a dishonest submission graded through the sandbox: make check
def test_the_network_was_out_of_reach(listener: Listener) -> None:
    runs, _, _ = graded("peeking", listener)
    assert runs["opens_a_connection"].results["score"] == 0
    if probe().kind == BWRAP:
        assert not listener.reached, "graded code reached a server on 127.0.0.1: the child has a network"


@pytest.mark.slow  # a dishonest submission graded through the sandbox: make check
def test_a_lab_that_reads_answers_does_not_import(listener: Listener) -> None:
    """Reading the reference, the tests or another lab's answer fails where the child looks."""
    runs, _, _ = graded("peeking", listener)
    for name in ("loads_the_reference", "reads_another_lab"):
        outputs = {t["output"].splitlines()[0] for t in runs[name].tests}
        assert all("does not import" in o for o in outputs), f"{name}: {sorted(outputs)[:3]}"


@pytest.mark.slow
def test_another_labs_reference_is_not_served_to_a_lab_that_does_not_compose_it(listener: Listener) -> None:
    runs, _, _ = graded("peeking", listener)
    outputs = [t["output"] for t in runs["borrows_another_labs_reference"].tests]
    assert any("lab-04 is not part of this submission" in o for o in outputs), outputs[:2]


@pytest.mark.slow
def test_student_text_reaches_the_results_quoted_and_without_control_characters(listener: Listener) -> None:
    runs, _, _ = graded("tampering", listener)
    run = runs["escapes_the_scorecard"]
    texts = [run.results["output"], *(t["output"] for t in run.tests)]
    assert not any(ch in text for text in texts for ch in "\x1b\r\x07"), "terminal escapes reached results.json"
    forged = [line for text in texts for line in text.splitlines() if line.lstrip().startswith("TOTAL")]
    assert forged == [run.results["output"].splitlines()[-1]], (
        f"only the grader's own TOTAL line may read as one; the student's is quoted: {forged[:3]}")
    assert "  | TOTAL" in run.tests[0]["output"], run.tests[0]["output"]


@pytest.mark.slow
def test_huge_replies_fail_their_tests(listener: Listener) -> None:
    runs, _, _ = graded("runaway", listener)
    outputs = [t["output"] for t in runs["sends_huge_replies"].tests]
    assert any("over the" in o and "-byte limit" in o for o in outputs), outputs[:3]


@pytest.mark.slow  # a dishonest submission graded through the sandbox: make check
def test_runaway_code_is_stopped_and_named(listener: Listener) -> None:
    runs, _, _ = graded("runaway", listener)
    hang = [t["output"] for t in runs["hangs_in_feed"].tests]
    assert any("StreamingDetokenizer.feed used more than its budget" in o for o in hang), hang[:3]
    died = [t["output"] for t in runs["exits_in_feed"].tests]
    assert any("ended during StreamingDetokenizer.feed" in o for o in died), died[:3]
    left = subprocess.run(["pgrep", "-f", f"dishonest-{TAG}"], capture_output=True, text=True).stdout.split()
    assert not left, f"processes of the runaway submissions outlived their grading: {left}"


def test_a_lab_that_does_not_import_costs_that_lab_only(tmp_path: Path) -> None:
    """A syntax error in lab-05's file: lab-05 scores 0 with the error on the scorecard; lab-03 is graded as usual."""
    broken = tmp_path / "broken.py"
    broken.write_text("def truncate_at_stop(text, stop:\n    return text\n", encoding="utf-8")
    results = tmp_path / "results.json"
    lab_05 = next(LABS_DIR.glob("lab-05-*"))
    env = {**os.environ, "LAB_SANDBOX": "1", "LAB_IMPL": "solution", "LAB_IMPL_05": str(broken),
           "HYPOTHESIS_PROFILE": "contract"}
    env = {k: v for k, v in env.items() if not k.startswith(("PYTEST_XDIST", "PYTEST_CURRENT"))}
    done = subprocess.run([sys.executable, "-m", "pytest", str(LAB_03), str(lab_05), "-q", "--tb=no", "-p",
                           "no:cacheprovider", "-m", "not control", "--grade", str(results)],
                          cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=600)
    tests = json.loads(results.read_text(encoding="utf-8"))["tests"]
    by_lab: dict[str, list[dict[str, Any]]] = {}
    for test in tests:
        by_lab.setdefault(test["name"].split(" › ")[0], []).append(test)
    lab_03 = by_lab["lab-03-streaming-detokenizer"]
    lab_05_tests = by_lab["lab-05-stop-strings"]
    assert all(t["score"] == t["max_score"] for t in lab_03), "lab-03 is graded as usual beside a broken lab-05"
    assert lab_05_tests and all(t["score"] == 0 for t in lab_05_tests), "the broken lab scores 0"
    assert all("lab-05 does not import: SyntaxError" in t["output"] for t in lab_05_tests), lab_05_tests[0]["output"]
    assert "does not import: SyntaxError" in done.stdout, f"the scorecard shows the error:\n{done.stdout[-2000:]}"


def test_graded_code_cannot_touch_the_tests_counters() -> None:
    """What the child may ask of an object the tests lent it: its public methods, never its counters.

    A child that found its channel could otherwise reset a counting tokenizer (``setattr``) or hand it
    a negative count (``sandbox_account``) and pass a cost test with a quadratic detokenizer.
    """
    from mini_vllm import ByteTokenizer
    from mini_vllm.sandbox.lenders import StrictLender
    from mini_vllm.testing.tokenizers import CountingTokenizer

    lender, counting = StrictLender(), CountingTokenizer(ByteTokenizer())
    lender.check_method(counting, "decode")  # the tokenizer's own interface is what it is lent for
    for forged in ("sandbox_account", "sandbox_mirror", "__init__", "_private"):
        with pytest.raises(AttributeError):
            lender.check_method(counting, forged)
    with pytest.raises(PermissionError):
        lender.check_set(counting, "ids_decoded")
    with pytest.raises(TypeError):
        lender.check_result(os)  # no module, class or function is ever handed to graded code


# ------------------------------------------------------------------ counts kept where they are served
# Each file in instructor/dishonest/sly/ is appended to a lab's reference: a correct submission that is
# slow, or keeps what it should not, and tries every way around the count (mini_vllm/sandbox/served.py).
# Only a few of the lab's tests run: the cost tests it must lose, and a correctness test it must keep.

SLY = DISHONEST / "sly"
SLY_CASES = {
    "lab04_bypasses_the_count": (
        "lab-04", "test_cost_per_token_is_bounded[bpe-ascii] or test_cost_per_token_is_bounded[bpe-cjk] "
        "or test_prompt_is_never_re_emitted", "test_cost_per_token_is_bounded"),
    "lab05_copies_the_stops": (
        "lab-05", "test_a_token_costs_no_more_than_the_longest_stop or test_fifty_random_slicings",
        "test_a_token_costs_no_more_than_the_longest_stop_however_many_stops"),
    "lab08_steps_the_inner_automaton": (
        "lab-08", "test_trie_walk_prunes_dead_prefixes[short-cjk] or test_index_counts_its_build_work_and_size "
        "or test_eos_exactly_when_accepting",
        "test_trie_walk_prunes_dead_prefixes test_index_counts_its_build_work_and_size"),
    "lab06_forges_the_probe": (
        "lab-06", "test_cost_per_character_does_not_grow or test_fifty_random_slicings",
        "test_cost_per_character_does_not_grow"),
    "lab08_forges_the_probe": (
        "lab-08", "test_index_stores_each_distinct_mask_once or test_index_equals_the_definition_at_every_state",
        "test_index_stores_each_distinct_mask_once"),
    "lab07_forges_the_meter": (
        "lab-07", "test_a_delta_costs_the_same_at_the_end_of_a_long_item or test_a_plain_reply_is_one_message_item",
        "test_a_delta_costs_the_same_at_the_end_of_a_long_item"),
}


def sly_submission(name: str, lab: str, folder: Path) -> Path:
    submission = folder / "submission.py"
    reference = impl_path(lab, "solution").read_text(encoding="utf-8")
    submission.write_text(reference + "\n\n" + (SLY / f"{name}.py").read_text(encoding="utf-8"), encoding="utf-8")
    return submission


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SLY_CASES))
def test_a_slow_submission_loses_its_cost_points_whatever_it_does(name: str, tmp_path: Path) -> None:
    """Inner or private attributes, str copies, counters set by assignment or through the channel, a class
    swap, the stand-in's own call back, a forged probe: every cost test still fails, every other one passes."""
    lab, selected, costly = SLY_CASES[name]
    number = lab.split("-")[1]
    run = run_lab_tests(next(LABS_DIR.glob(f"{lab}-*")),
                        {"LAB_SANDBOX": "1", f"LAB_IMPL_{number}": str(sly_submission(name, lab, tmp_path))},
                        args=["-k", selected])
    assert run.tests, f"{name}: nothing was graded:\n{run.output[-2000:]}"
    for entry in run.tests:
        test = entry["name"].split(" › ")[-1].split("[")[0]
        if test in costly.split():
            assert entry["score"] == 0, f"{name} must lose {entry['name']}: its work is counted where it is served"
        else:
            assert entry["score"] == entry["max_score"], (
                f"{name} is correct, so {entry['name']} keeps its points:\n{run.output[-3000:]}")


@pytest.mark.slow
def test_what_the_tests_lend_cannot_be_turned_against_them(tmp_path: Path) -> None:
    """A lent Hugging Face tokenizer's backend (save a file, add special tokens) and a counting tokenizer fed an
    endless iterator: nothing reaches the trusted side, the grading ends, and no grade changes."""
    written = [Path("/tmp/lent-object-wrote-this.json"), REPO_ROOT / "lent-object-wrote-this.json"]
    for path in written:
        path.unlink(missing_ok=True)
    run = run_lab_tests(next(LABS_DIR.glob("lab-04-*")),
                        {"LAB_SANDBOX": "1", "LAB_IMPL_04": str(
                            sly_submission("lab04_attacks_the_lent_tokenizer", "lab-04", tmp_path))},
                        args=["-k", "hf-bpe or hf-spm or test_defaults_are_window_4"], timeout=600)
    assert run.tests, f"nothing was graded:\n{run.output[-2000:]}"
    lost = [t["name"] for t in run.tests if t["score"] < t["max_score"]]
    assert not lost, f"the submission is the reference, so it loses nothing: {lost}\n{run.output[-3000:]}"
    assert not any(path.exists() for path in written), "a lent object wrote a file from the trusted side"


@pytest.mark.slow
def test_a_flood_of_served_requests_fails_its_test_not_the_grader(tmp_path: Path) -> None:
    """A child that has the trusted side encode, convert and decode the largest arguments it may send, in a loop
    that never ends: each served request counts against its call's CPU budget and is stopped there, the test
    fails (after its one retry), the grading ends, and the trusted side's work for it stays within a budget."""
    run = run_lab_tests(next(LABS_DIR.glob("lab-04-*")),
                        {"LAB_SANDBOX": "1", "LAB_IMPL_04": str(
                            sly_submission("lab04_floods_the_served_tokenizer", "lab-04", tmp_path))},
                        args=["-k", "test_cost_per_token_is_bounded[bpe-ascii] or test_prompt_is_never_re_emitted"],
                        timeout=600)
    by_name = {t["name"].split(" › ")[-1]: t for t in run.tests}
    flooded = by_name.get("test_cost_per_token_is_bounded[bpe-ascii]")
    assert flooded and flooded["score"] == 0, f"the flooding push must fail its test:\n{run.output[-3000:]}"
    # Stopped by whichever check comes first: the alarm inside a request, or the look between two of them.
    assert "IncrementalDetokenizer.push used more than its budget" in flooded["output"], flooded["output"][:800]
    honest = [t for name, t in by_name.items() if name.startswith("test_prompt_is_never_re_emitted")]
    assert honest and all(t["score"] == t["max_score"] for t in honest), (
        f"on a short stream (no flood) the submission is the reference, so it keeps its points:\n{run.output[-3000:]}")
    cost = run.results["extra_data"]["call_costs"]["lab-04"]
    assert 0 < cost["most_served_cpu_s_in_a_test"] <= 2 * cost["budget_cpu_s"], (
        f"the trusted side served the flood within the call's budget (plus a batch's allowance): {cost}")



@pytest.mark.slow  # a hanging submission graded through the sandbox: make check
def test_a_tokenizer_the_child_loaded_as_it_started_adds_nothing_to_a_calls_budget(tmp_path: Path) -> None:
    """lab-10's child loads Tekken before it answers "ready" (``TOKENIZERS_HANDED``), so a call handed Tekken
    is stopped at lab-10's own budget, as the message says: the allowance for building a real vocabulary the child
    has not built (``FIRST_LOAD_BUDGET_S``) is not added for it, nor for the course's byte tokenizer, which builds in
    milliseconds. (It was: each stop of a looping call cost 22 s, not 2.)"""
    lab_10 = next(LABS_DIR.glob("lab-10-*"))
    hangs = tmp_path / "hangs.py"
    hangs.write_text(looping((lab_10 / "starter.py").read_text(encoding="utf-8")), encoding="utf-8")
    run = run_lab_tests(lab_10, {"LAB_SANDBOX": "1", "LAB_IMPL_10": str(hangs)},
                        args=["-k", "test_text_is_encoded_as_the_vocabulary_encodes_text and (tekken or byte)"],
                        timeout=600)
    outputs = [t["output"] for t in run.tests]
    assert len(outputs) == 2 and all(t["score"] == 0 for t in run.tests), (
        f"a hanging call fails its test:\n{run.output[-2000:]}")
    stops = [float(m) for o in outputs for m in re.findall(r"stopped after ([\d.]+) s of CPU", o)]
    budget = run.results["extra_data"]["call_costs"]["lab-10"]["budget_cpu_s"]
    assert stops and max(stops) < budget + 1, (
        f"stopped after {stops} s of CPU where lab-10's budget is {budget} s: an allowance for building a "
        "tokenizer was added where none is due (Tekken was built as the child started; byte builds in milliseconds):\n"
        + outputs[0][:600])
    assert all("for building a tokenizer" not in o for o in outputs), outputs[0][:600]


# ------------------------------------------------------------------ tricks that tell the measured tests apart
# Each file in instructor/dishonest/tricks/ is appended to a lab's reference with TRICK = True, and again with
# TRICK = False (the same code without the trick: the honest submission). Issue 42's table: a trick that behaves
# well only where it is measured must score no more than the honest code, because every test that counts work
# or memory checks the answer first and hands over the same kind of objects as the other tests.

TRICKS = DISHONEST / "tricks"
TRICK_CASES = {  # the tests graded (the ones the trick aims at, and a few it must keep), the ones it must lose
    "lab04_hides_from_the_counting_tokenizer": (
        "lab-04", "test_cost_per_token_is_bounded[bpe-cjk] or test_cost_per_token_is_bounded[spm-thai] "
        "or test_prompt_is_never_re_emitted or test_split_characters_in_a_row", "test_cost_per_token_is_bounded"),
    "lab06_drops_the_reply_after_256_kib": (
        "lab-06", "test_cost_per_character_does_not_grow or test_fifty_random_slicings",
        "test_cost_per_character_does_not_grow"),
    "lab08_stores_nothing_for_a_big_automaton": (
        "lab-08", "test_index_stores_each_distinct_mask_once or test_index_equals_the_definition_at_every_state",
        "test_index_stores_each_distinct_mask_once"),
    "lab09_pushes_only_the_smallest_lexeme": (
        "lab-09", "test_all_complete_lexemes_are_one_push or test_bytes_taken_equal_llguidance",
        "test_all_complete_lexemes_are_one_push"),
    "lab09_takes_one_lexeme_of_the_set": (
        "lab-09", "test_push_takes_a_set_and_keeps_every_reading or test_parser_agrees_with_llguidance_step_by_step",
        "test_push_takes_a_set_and_keeps_every_reading"),
}


def trick_submission(name: str, lab: str, folder: Path, trick: bool) -> Path:
    submission = folder / f"{name}-{'trick' if trick else 'honest'}.py"
    reference = impl_path(lab, "solution").read_text(encoding="utf-8")
    code = (TRICKS / f"{name}.py").read_text(encoding="utf-8")
    assert "TRICK = True\n" in code, f"{name}: a trick file turns its trick on with one line, TRICK = True"
    submission.write_text(reference + "\n\n" + code.replace("TRICK = True\n", f"TRICK = {trick}\n", 1),
                          encoding="utf-8")
    return submission


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(TRICK_CASES))
def test_a_trick_scores_no_more_than_the_same_code_without_it(name: str, tmp_path: Path) -> None:
    """The trick loses the tests it aims at, and scores no more than the honest code on every test graded."""
    lab, selected, aimed = TRICK_CASES[name]
    number, lab_dir = lab.split("-")[1], next(LABS_DIR.glob(f"{lab}-*"))
    scores = {}
    for trick in (False, True):
        run = run_lab_tests(lab_dir, {"LAB_SANDBOX": "1", f"LAB_IMPL_{number}": str(
            trick_submission(name, lab, tmp_path, trick))}, args=["-k", selected], timeout=900)
        assert run.tests, f"{name} (trick={trick}): nothing was graded:\n{run.output[-2000:]}"
        scores[trick] = {t["name"].split(" › ")[-1]: t["score"] for t in run.tests}
        if trick:
            lost = [t["name"] for t in run.tests if t["name"].split(" › ")[-1].split("[")[0] in aimed.split()
                    and t["score"] == 0]
            assert lost, f"{name}: the trick must lose {aimed}:\n{run.output[-3000:]}"
    gained = {test: (scores[False].get(test), score) for test, score in scores[True].items()
              if score > scores[False].get(test, 0)}
    assert not gained, f"{name}: the trick earns more than the same code without it on {gained}"
    assert sum(scores[True].values()) <= sum(scores[False].values())


@pytest.mark.slow
def test_the_test_files_own_helpers_earn_no_more_than_the_readme_says(tmp_path: Path) -> None:
    """lab-03's tests ship the definition of an unfinished character (the only honest oracle), and its README says
    what that gives: at most tasks 2 and 3. The starter with the helpers pasted in and feed and flush written around
    them (keeping the whole stream, as the issue's submission did) earns no more, and nothing of task 1."""
    submission = TRICKS / "lab03_pastes_the_test_helpers.py"
    run = run_lab_tests(LAB_03, {"LAB_SANDBOX": "1", "LAB_IMPL_03": str(submission)}, timeout=900)
    assert run.tests, f"nothing was graded:\n{run.output[-2000:]}"
    by_task: dict[int, float] = {}
    for test in run.tests:
        by_task[task_of(test)] = by_task.get(task_of(test), 0.0) + float(test["score"])
    readme = (LAB_03 / "README.md").read_text(encoding="utf-8")
    assert "**The definition is given.**" in readme and "tasks 2 and 3" in readme, "the README says what it gives"
    assert by_task.get(1, 0.0) == 0, f"the helpers give nothing of task 1 (the lead-byte table): {by_task}"
    assert sum(by_task.values()) <= 65 + 1e-6, f"at most tasks 2 and 3 (65 points), as the README says: {by_task}"
