"""A busy machine or a neighbour never costs points: the same per-test results quiet and under load.

Budgets are CPU time (mini_vllm/sandbox/budget.py). Here the reference of every lab, and a
submission with two wrong variants (lab-04 shows the prompt again, lab-08 lifts characters but
not their bytes), are graded quiet and then beside three CPU burners per CPU (six on a 2-core machine;
the two gradings side by side, each in a session of its own), each burner in a session of its
own (setsid), so the scheduler's per-session groups cannot shield the grader: the per-test
outcomes must be identical. The burners start once both gradings have collected their tests, so every
graded call, the sandbox's start and the tests' own work run beside them. And a student graded in
``make grade-batch`` beside one who forks sixty such spinners loses nothing.

To fit CI, each lab is graded on one to three tests, among them the one that makes the course's
heaviest call (lab-08's mask over Tekken's 131,072 tokens, 2 s of CPU): ``SELECTED``. Every
burner is ended by its pid, whatever happens.
"""

from __future__ import annotations

import contextlib
import csv
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from instructor.collected import SIGNAL_ENV as COLLECTED_SIGNAL
from mini_vllm.labs import LABS_DIR, REPO_ROOT
from mini_vllm.sandbox.budget import measurable

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1500),
              pytest.mark.skipif(not measurable(), reason="CPU time is read from /proc (Linux)")]

# Three per CPU: each grading then gets at most a quarter of a CPU (two gradings and six burners on two),
# so a call that uses a third of its CPU budget takes longer than that budget in wall time: a budget read
# off the clock would fail it, one of CPU time does not. (Twelve, as this test once ran, proved no more and
# cost make check about 45 s of CPU: the burners spin for as long as the loaded gradings take.)
BURNERS = 3 * len(os.sched_getaffinity(0))  # the CPUs this test may use
SELECTED = ("(fifty_random_slicings and not tekken and not mistral and not hf) or "
            "(pipeline_alone_reassembles and hello-b) or tekken_byte_tokens or "
            "(lifecycle_holds_for_every_reply and weather) or rollback_returns_to_the_checkpoint or "
            "a_tool_calls_arguments_are_an_object_written_once")  # 16 tests
VARIANTS = REPO_ROOT / "instructor" / "wrong_variants"
TWO_WRONG = {"LAB_IMPL_04": str(VARIANTS / "lab_04" / "prompt_re_emitted.py"),
             "LAB_IMPL_08": str(VARIANTS / "lab_08" / "char_boundary_only.py"),
             "LAB_SANDBOX_TRUSTED": "1"}  # the variants import the reference they change
LAB_04, LAB_08 = (next(LABS_DIR.glob(f"lab-{n}-*")) for n in ("04", "08"))


@contextlib.contextmanager
def burners(count: int, spin: str = "while True: pass") -> Iterator[None]:
    """``count`` processes spinning on the CPU, each in a session of its own; ended by pid on the way out."""
    spinning = [subprocess.Popen([sys.executable, "-c", spin], start_new_session=True) for _ in range(count)]
    try:
        yield
    finally:
        for process in spinning:
            process.kill()
        for process in spinning:
            process.wait()


def outcomes(*gradings: tuple[list[Path], dict[str, str]],
             load: Callable[[], contextlib.AbstractContextManager[None]] = contextlib.nullcontext,
             ) -> list[dict[str, str]]:
    """Grade each ``(paths, env)`` as ``make grade`` does (sandboxed, the SELECTED tests), all at once; for each,
    every test's name -> status and output. Each grading waits after collecting its tests (instructor/collected.py)
    until ``load`` is entered, which is held until they end: their tests, the sandbox's start and every graded
    call run under it. (Collecting every lab's tests is half a grading's CPU and the same whatever the load: under
    twelve burners it took most of a minute, with the rest of make check starved beside it.)

    Each grading runs in a session of its own, as a student's ``make grade`` in a terminal does (and as each
    grading child already does): beside the burners it gets one session's share of the CPU, like each of them,
    whether or not this test shares its session with other work (a pytest-xdist worker beside it, whose share
    would otherwise be split with the grading, and which would crawl for as long). The gradings run side by
    side, so each also has the other beside it."""
    with tempfile.TemporaryDirectory() as scratch:
        running = []
        for number, (paths, env) in enumerate(gradings):
            results, log = Path(scratch) / f"results-{number}.json", Path(scratch) / f"output-{number}.txt"
            child_env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "LAB_"))}
            collected = Path(scratch) / f"collected-{number}"
            child_env.update({"LAB_SANDBOX": "1", "LAB_IMPL": "solution", "HYPOTHESIS_PROFILE": "ci", **env,
                              COLLECTED_SIGNAL: str(collected)})
            with log.open("w", encoding="utf-8") as output:
                process = subprocess.Popen([sys.executable, "-m", "pytest", *map(str, paths), "-q", "-p",
                                            "no:cacheprovider", "-p", "no:xdist", "-p", "instructor.collected",
                                            "-m", "not control", "--tb=no", "-k", SELECTED, "--grade",
                                            str(results)], cwd=REPO_ROOT, env=child_env, stdout=output,
                                           stderr=subprocess.STDOUT, start_new_session=True)
            running.append((process, results, log, collected))
        deadline = time.monotonic() + 600
        while not all(c.exists() or p.poll() is not None for p, _, _, c in running) and time.monotonic() < deadline:
            time.sleep(0.05)
        graded = []
        with load():
            for _, _, _, collected in running:
                Path(f"{collected}.go").touch()  # every grading's tests start now, beside the load
            for process, _, _, _ in running:
                try:
                    process.wait(timeout=1200)
                except subprocess.TimeoutExpired:
                    os.killpg(process.pid, signal.SIGKILL)  # its session: the grading and what it started
                    process.wait()
        for _process, results, log, _ in running:
            assert results.exists(), f"no results.json:\n{log.read_text(encoding='utf-8')[-4000:]}"
            tests = json.loads(results.read_text(encoding="utf-8"))["tests"]
            graded.append({t["name"]: f"{t['status']}: {t['output'].splitlines()[0] if t['output'] else ''}"
                           for t in tests})
    return graded


def differences(quiet: dict[str, str], loaded: dict[str, str]) -> list[str]:
    return [f"{name}\n    quiet:  {quiet.get(name)}\n    loaded: {loaded.get(name)}"
            for name in sorted(quiet.keys() | loaded.keys()) if quiet.get(name) != loaded.get(name)]


def test_the_reference_and_two_wrong_variants_grade_the_same_beside_three_burners_per_cpu() -> None:
    every_lab = sorted(p for p in LABS_DIR.iterdir() if p.is_dir() and p.name.startswith("lab-"))
    reference_quiet, wrong_quiet = outcomes((every_lab, {}), ([LAB_04, LAB_08], TWO_WRONG))
    reference_loaded, wrong_loaded = outcomes((every_lab, {}), ([LAB_04, LAB_08], TWO_WRONG),
                                              load=lambda: burners(BURNERS))
    graded_labs = {name.split(" › ")[0][:6] for name in reference_quiet}
    assert graded_labs == {p.name[:6] for p in every_lab}, f"SELECTED must pick tests in every lab: {graded_labs}"
    failed = [f"{n}: {s}" for n, s in reference_quiet.items() if not s.startswith("passed")]
    assert not failed, "the reference passes every selected test:\n" + "\n".join(failed)
    changed = differences(reference_quiet, reference_loaded)
    assert not changed, f"the reference lost points beside {BURNERS} burners:\n" + "\n".join(changed)
    lost = [n for n, s in wrong_quiet.items() if not s.startswith("passed")]
    assert any("lab-04" in n for n in lost) and any("lab-08" in n for n in lost), (
        f"the two wrong variants must fail some selected tests, or this compares nothing: {lost}")
    assert not differences(wrong_quiet, wrong_loaded), (
        f"the wrong variants were graded differently beside {BURNERS} burners:\n"
        + "\n".join(differences(wrong_quiet, wrong_loaded)))


SPINNERS_AT_IMPORT = '''
import os, time
for _ in range(60):  # sixty spinners, each in a session of its own, left running for the whole grading
    if os.fork() == 0:
        os.setsid()
        while True:
            pass
'''


def test_a_neighbour_forking_sixty_spinners_in_batch_costs_nothing(tmp_path: Path) -> None:
    from instructor.autograder import batch

    lab_03 = next(LABS_DIR.glob("lab-03-*"))
    release = LABS_DIR.relative_to(REPO_ROOT) / lab_03.name / "starter.py"
    spinner = f"spinner{uuid.uuid4().hex[:12]}"  # its grading's processes carry this name in their command lines
    for student, text in (("honest", ""), (spinner, SPINNERS_AT_IMPORT)):
        target = tmp_path / "submissions" / student / release
        target.parent.mkdir(parents=True)
        target.write_text(text + (lab_03 / "solution.py").read_text(encoding="utf-8"), encoding="utf-8")
    out = tmp_path / "out"
    assert batch.main([str(tmp_path / "submissions"), "--out", str(out), "--labs", "03", "--jobs", "2"]) == 0
    with (out / "scores.csv").open(encoding="utf-8") as handle:
        rows = {row["submission"]: row for row in csv.DictReader(handle)}
    honest = json.loads((out / "honest" / "results.json").read_text(encoding="utf-8"))
    lost = [f"{t['name']}: {t['output'].splitlines()[:1]}" for t in honest["tests"] if t["score"] < t["max_score"]]
    assert not lost and rows["honest"]["total"] == rows["honest"]["max"], (
        "the honest student lost points beside a neighbour's spinners:\n" + "\n".join(lost))
    if shutil.which("pgrep"):
        left = subprocess.run(["pgrep", "-f", spinner], capture_output=True, text=True).stdout.split()
        assert not left, f"the spinners outlived their grading: {len(left)} processes remain"
