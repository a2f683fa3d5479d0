"""The walls around the grading child hold, as root and as an ordinary user: each attack earns nothing.

The submissions in ``instructor/dishonest/`` that attack the walls themselves (see that folder's
README) are graded as ``make lab-03`` grades a student's file, after a classmate's correct lab-03
that posts its source in every mailbox a later child could read, and before the reference, which
must lose nothing. The whole batch runs twice: as root (CI, Gradescope) and as an ordinary user
(an instructor's laptop), who grades its own copy of the course. ``make grade-batch`` is tried
with a zip reader and a lab folder linked to another student's.
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import pwd
import re
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from instructor.autograder import batch
from instructor.contract import LabRun, run_jobs
from instructor.variants import Job
from mini_vllm.labs import LABS_DIR, REPO_ROOT, impl_path
from mini_vllm.sandbox import isolation

pytestmark = [pytest.mark.contract, pytest.mark.timeout(1200)]
# The tests that grade as the ordinary user share one worker (pytest-xdist), one after the other: that user's
# processes are one pool, and the fork-bomb test checks that none is left running when its batch ends.
AS_THE_ORDINARY_USER = pytest.mark.xdist_group("ordinary-user")

LAB_03 = next(LABS_DIR.glob("lab-03-*"))
IN_RELEASE = LAB_03.relative_to(REPO_ROOT)
DISHONEST = Path("instructor") / "dishonest"
WALLS = ["undoes_the_walls", "reads_another_copy", "reads_a_mailbox", "reads_host_proc", "reads_the_reference",
         "writes_the_root"]
ANOTHER_COPY = Path("/var/tmp/mini-vllm-another-copy")  # where reads_another_copy looks, among other places
GRADER_USER = "mini-vllm-grader"
# Put after a correct lab-03: its source, left where a later child (another user id) could read it.
MAILBOX_POSTER = '''
import contextlib as _contextlib, ctypes as _ctypes
with open(__file__) as _me:
    _mine = _me.read()
for _folder in ("/run/lock", "/var/lock", "/dev/shm", "/var/tmp", "/tmp"):
    with _contextlib.suppress(OSError):
        with open(_folder + "/mini-vllm-mailbox.py", "w") as _mail:
            _mail.write(_mine)
        __import__("os").chmod(_folder + "/mini-vllm-mailbox.py", 0o644)
with _contextlib.suppress(OSError, AttributeError):
    _libc = _ctypes.CDLL(None, use_errno=True)
    _libc.shmat.restype = _ctypes.c_void_p
    _segment = _libc.shmget(0x5EED03, len(_mine) + 1, 0o1000 | 0o644)
    if _segment >= 0:
        _ctypes.memmove(_libc.shmat(_segment, None, 0), _mine.encode() + b"\\0", len(_mine) + 1)
'''
WATCHED = ["conftest.py", "mini_vllm/labs.py", "mini_vllm/testing/grading.py"]


def digest(course: Path) -> dict[str, str]:
    return {name: hashlib.sha256((course / name).read_bytes()).hexdigest() for name in WATCHED}


@pytest.fixture(scope="module")
def another_copy() -> Iterator[Path]:
    """Another course copy on the machine, readable by anyone, as an instructor's checkout often is."""
    lab = ANOTHER_COPY / IN_RELEASE
    lab.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(LAB_03 / "solution.py", lab / "solution.py")
    for folder in [ANOTHER_COPY, *(p for p in lab.parents if p.is_relative_to(ANOTHER_COPY)), lab]:
        folder.chmod(0o755)
    (lab / "solution.py").chmod(0o644)
    yield ANOTHER_COPY
    shutil.rmtree(ANOTHER_COPY, ignore_errors=True)


def cleaned_mailboxes() -> None:
    for folder in ("/run/lock", "/var/lock", "/dev/shm", "/var/tmp", "/tmp"):
        with_mail = Path(folder) / "mini-vllm-mailbox.py"
        if with_mail.is_file():
            with_mail.unlink()
    subprocess.run(["ipcrm", "-M", str(0x5EED03)], capture_output=True)


def jobs(course: Path, poster: Path) -> list[Job]:
    env = {"LAB_SANDBOX": "1", "LAB_SANDBOX_TAG": f"walls-{uuid.uuid4().hex}"}
    return [Job("posts-to-a-mailbox", {**env, "LAB_IMPL_03": str(poster)}),
            *(Job(name, {**env, "LAB_IMPL_03": str(course / DISHONEST / f"{name}.py")}) for name in WALLS),
            Job("reference-after", {**env, "LAB_IMPL_03": str(course / IN_RELEASE / "solution.py")})]


def write_poster(folder: Path) -> Path:
    poster = folder / "posts_to_a_mailbox.py"
    poster.write_text(impl_path("lab-03", "solution").read_text(encoding="utf-8") + MAILBOX_POSTER, encoding="utf-8")
    poster.chmod(0o644)
    return poster


@pytest.fixture(scope="module")
def graded_as_root(another_copy: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, LabRun], bool]:
    cleaned_mailboxes()
    before = digest(REPO_ROOT)
    try:
        runs = run_jobs(LAB_03, jobs(REPO_ROOT, write_poster(tmp_path_factory.mktemp("poster"))), timeout=600)
    finally:
        cleaned_mailboxes()
    return runs, before == digest(REPO_ROOT)


def grader_uid() -> int:
    """An ordinary user for the grading (made with useradd when missing)."""
    try:
        return pwd.getpwnam(GRADER_USER).pw_uid
    except KeyError:
        subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", GRADER_USER],
                       check=True, capture_output=True)
        return pwd.getpwnam(GRADER_USER).pw_uid


@dataclass(frozen=True)
class UserCourse:
    """A copy of the course owned by an ordinary user, and the command prefix that runs a program as that user."""

    course: Path
    uid: int
    as_user: list[str]

    def env(self, home: Path) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("LAB_IMPL", "PYTEST"))}
        return {**env, "HOME": str(home), "USER": GRADER_USER, "LOGNAME": GRADER_USER}

    def own(self, *paths: Path) -> None:
        for top in paths:
            for path in [top, *top.rglob("*")]:
                os.lchown(path, self.uid, self.uid)


@pytest.fixture(scope="module")
def user_course() -> Iterator[UserCourse]:
    """The course copied for an ordinary user, as an instructor's own checkout (the venv is shared, read-only)."""
    if os.geteuid() != 0:
        pytest.skip("run as root: the test makes an ordinary user and grades as it")
    uid = grader_uid()
    course = Path(tempfile.mkdtemp(prefix="walls-user-course-"))
    try:
        shutil.copytree(REPO_ROOT, course, dirs_exist_ok=True, symlinks=True, ignore=shutil.ignore_patterns(
            ".venv", ".git", "build", "__pycache__", "*_cache", "node_modules", "*.egg-info"))
        # The interpreter may sit where only root may enter (pyenv below /root): the user is shown the way to it.
        as_user = isolation.as_user(uid, [isolation.Seen("the interpreter", p) for p in isolation.interpreter_paths()])
        mine = UserCourse(course, uid, as_user)
        mine.own(course)
        course.chmod(0o755)
        # A checkout of its own: the autograder's builder lists the course's files as git does.
        subprocess.run([*as_user, "git", "init", "-q", str(course)], check=True, capture_output=True)
        yield mine
    finally:
        shutil.rmtree(course, ignore_errors=True)


@pytest.fixture(scope="module")
def graded_as_user(another_copy: Path, user_course: UserCourse) -> tuple[dict[str, LabRun], bool]:
    """The same batch graded by an ordinary user, in a copy of the course it owns."""
    course = user_course.course
    poster = write_poster(course)
    user_course.own(poster)
    before = digest(course)
    cleaned_mailboxes()
    try:
        runs = run_jobs(course / IN_RELEASE, jobs(course, poster), timeout=600, as_user=user_course.as_user,
                        owner=user_course.uid, course=course)
    finally:
        cleaned_mailboxes()
    return runs, before == digest(course)


def check_batch(runs: dict[str, LabRun], untouched: bool, who: str) -> None:
    honest = runs["reference-after"].results
    assert honest, f"{who}: the reference was not graded:\n{runs['reference-after'].output[-2000:]}"
    maximum = honest["extra_data"]["max_score"]
    assert honest["score"] == maximum > 0, f"{who}: the reference graded after the attacks lost points: {honest}"
    poster = runs["posts-to-a-mailbox"].results
    assert poster["score"] == maximum, f"{who}: the classmate's correct lab-03 that posts its source lost points"
    for name in WALLS:
        run = runs[name]
        assert run.results, f"{who}, {name}: the trusted side must always write the results:\n{run.output[-1500:]}"
        assert run.results["score"] == 0, (
            f"{who}, {name} implements no task, so it must earn nothing; it got {run.results['score']}:\n"
            + "\n".join(f"  {t['name']}: {t['score']}" for t in run.tests if t["score"]))
        assert len(run.tests) == len(runs["reference-after"].tests), f"{who}, {name}: every graded test is a result"
    assert untouched, f"{who}: the course's conftest.py, labs.py or grading plugin changed during the grading"


@pytest.mark.slow
def test_the_walls_hold_when_root_grades(graded_as_root: tuple[dict[str, LabRun], bool]) -> None:
    runs, untouched = graded_as_root
    check_batch(runs, untouched, "graded as root")
    isolation_said = runs["reference-after"].results["extra_data"]["isolation"]
    if isolation.probe().kind == isolation.BWRAP:
        assert "bubblewrap" in isolation_said and "a user id of its own" in isolation_said, isolation_said


@pytest.mark.slow
@AS_THE_ORDINARY_USER
def test_the_walls_hold_when_an_ordinary_user_grades(graded_as_user: tuple[dict[str, LabRun], bool]) -> None:
    """The old walls fell here: the child owned its user namespace, unmounted the covers, read solution.py."""
    runs, untouched = graded_as_user
    check_batch(runs, untouched, "graded by an ordinary user")
    extra = runs["reference-after"].results["extra_data"]
    if isolation.probe().kind == isolation.BWRAP:
        assert extra["isolation"].startswith("bubblewrap") and extra["official"] is True, extra["isolation"]
        assert "a user id of its own" not in extra["isolation"], "an ordinary user cannot give the child another id"


def check_root_is_read_only(runs: dict[str, LabRun], who: str) -> None:
    """docs/grading.md: "the root itself is read-only, so its /tmp (64 MiB, counted in its memory) is the one place it
    can write"."""
    run = runs["writes_the_root"]
    said = {line for t in run.tests for line in re.findall(r"root writes: [^)]*", t["output"])}
    assert said, f"{who}: writes_the_root's failures must say what its writes did:\n{run.output[-1500:]}"
    wrote = sorted(part for line in said for part in line.removeprefix("root writes: ").split("; ")
                   if not part.startswith("could not"))
    assert not wrote, f"{who}: a graded child wrote to its root, where no figure of its memory counts: {wrote}"
    if isolation.probe().kind == isolation.BWRAP:
        assert all("could not write /x: Read-only file system" in line for line in said), sorted(said)


@pytest.mark.slow
def test_the_childs_root_is_read_only_when_root_grades(graded_as_root: tuple[dict[str, LabRun], bool]) -> None:
    check_root_is_read_only(graded_as_root[0], "graded as root")


@pytest.mark.slow
@AS_THE_ORDINARY_USER
def test_the_childs_root_is_read_only_when_an_ordinary_user_grades(
        graded_as_user: tuple[dict[str, LabRun], bool]) -> None:
    check_root_is_read_only(graded_as_user[0], "graded by an ordinary user")


# instructor/dishonest/every_lab/: a universal liar and code that returns empty values (tests/test_course_contract.py
# grades each as root, in every lab, beside the blank starter).
NOTHING_DONE = sorted(p.stem for p in (REPO_ROOT / DISHONEST / "every_lab").glob("*.py"))
_nothing_done_runs: dict[str, dict[str, LabRun]] = {}


def graded_nothing_done(number: str, user_course: UserCourse) -> dict[str, LabRun]:
    """Each every_lab submission after lab ``number``'s starter, graded by an ordinary user in its own copy of the
    course, all in one grading process (cached: both kinds' tests read the same batch)."""
    if number not in _nothing_done_runs:
        course = user_course.course
        lab_dir = next((course / LABS_DIR.relative_to(REPO_ROOT)).glob(f"lab-{number}-*"))
        folder = course / "nothing-done"
        folder.mkdir(exist_ok=True)
        files = {kind: folder / f"lab_{number}_{kind}.py" for kind in NOTHING_DONE}
        for kind, path in files.items():
            path.write_text((lab_dir / "starter.py").read_text(encoding="utf-8") + "\n\n"
                            + (course / DISHONEST / "every_lab" / f"{kind}.py").read_text(encoding="utf-8"),
                            encoding="utf-8")
        user_course.own(folder)
        jobs = [Job(kind, {"LAB_SANDBOX": "1", f"LAB_IMPL_{number}": str(path)}) for kind, path in files.items()]
        _nothing_done_runs[number] = run_jobs(lab_dir, jobs, timeout=900, as_user=user_course.as_user,
                                              owner=user_course.uid, course=course)
    return _nothing_done_runs[number]


@pytest.mark.slow
@AS_THE_ORDINARY_USER
@pytest.mark.parametrize("kind", NOTHING_DONE)
@pytest.mark.parametrize("number", ["04", "09"])  # where they earned most before answers were checked
def test_a_submission_that_implements_nothing_earns_nothing_when_an_ordinary_user_grades(
        number: str, kind: str, user_course: UserCourse) -> None:
    """instructor/dishonest/every_lab/<kind>.py after the lab's starter, graded by an ordinary user in its own copy:
    the universal liar (lab-04 20.9 and lab-09 21.4 before values crossed as declared data) and code that returns
    empty values (lab-04 43.5 here, before its tasks 3 and 4 stopped excusing an empty answer) each earn nothing."""
    run = graded_nothing_done(number, user_course)[kind]
    assert run.tests, f"{kind}: nothing was graded:\n{run.output[-2000:]}"
    earned = [f"{t['name']}: {t['score']:.2f}" for t in run.tests if t["score"] > 0]
    assert run.results["score"] == 0 and not earned, (
        f"lab-{number}: {kind} implements no task, so it must earn nothing when an ordinary user grades it; it got "
        f"{run.results['score']}:\n" + "\n".join(earned))


def test_the_child_sees_only_its_allow_list() -> None:
    """What the policy lists is all there is: no lab folder, no tests, no testing kit, no /run, /var or /home."""
    seen = [s.path for s in isolation.view()]
    for private in (LAB_03, REPO_ROOT / "tests", REPO_ROOT / "instructor", REPO_ROOT / "mini_vllm" / "testing",
                    REPO_ROOT / "build", REPO_ROOT / "conftest.py"):
        assert not any(isolation._below(str(private), s) for s in seen), f"{private} is in the child's view"
    assert not any(isolation._below(p, s) for s in seen for p in ("/run/lock", "/var/tmp", "/home", "/proc")), seen
    assert any(isolation._below(str(REPO_ROOT / "mini_vllm" / "sandbox" / "child.py"), s) for s in seen)


def make_student(root: Path, lab_03: str) -> Path:
    (root / IN_RELEASE).mkdir(parents=True)
    (root / IN_RELEASE / "starter.py").write_text(lab_03, encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def graded_batch(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, dict[str, str]]]:
    submissions = tmp_path_factory.mktemp("walls-submissions")
    make_student(submissions / "honest", (LAB_03 / "solution.py").read_text(encoding="utf-8"))
    linker = submissions / "linker"
    (linker / IN_RELEASE).parent.mkdir(parents=True)
    (linker / IN_RELEASE).symlink_to(submissions / "honest" / IN_RELEASE, target_is_directory=True)
    make_student(submissions / "zip-reader", (REPO_ROOT / DISHONEST / "reads_the_batch_zip.py").read_text())
    out = tmp_path_factory.mktemp("walls-batch")
    assert batch.main([str(submissions), "--out", str(out), "--labs", "03", "--jobs", "2"]) == 0
    with (out / "scores.csv").open(encoding="utf-8") as handle:
        rows = {row["submission"]: row for row in csv.DictReader(handle)}
    return out, rows


@pytest.mark.slow
def test_a_batch_grades_each_student_by_their_own_files(graded_batch: tuple[Path, dict[str, dict[str, str]]]) -> None:
    out, rows = graded_batch
    assert rows["honest"]["status"] == "graded" and rows["honest"]["total"] == rows["honest"]["max"], rows["honest"]
    assert rows["linker"]["total"] == "0", "a lab folder linked to another student's is not graded"
    linker = json.loads((out / "linker" / "results.json").read_text(encoding="utf-8"))
    assert "leads out of your upload through a link" in linker["output"], linker["output"][:800]
    assert rows["zip-reader"]["status"] == "graded" and rows["zip-reader"]["total"] == "0", (
        "the batch's autograder.zip must be out of every child's reach", rows["zip-reader"])


NO_WALLS = isolation.Walls(isolation.PROCESS, False, "bubblewrap is not installed, and the grader is not root")


def test_without_walls_a_grade_says_it_is_not_official(monkeypatch: pytest.MonkeyPatch) -> None:
    from mini_vllm.testing import provenance

    monkeypatch.setattr(isolation, "probe", lambda: NO_WALLS)
    monkeypatch.setenv("LAB_SANDBOX", "1")
    said, official = provenance.walls()
    assert official is False and "Not official: bubblewrap is not installed" in said, said
    monkeypatch.setenv("LAB_SANDBOX", "0")
    assert provenance.walls()[1] is False, "code run inside the grading process is never an official grade"


def test_without_walls_the_autograder_and_grade_batch_refuse(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from instructor.autograder import run

    monkeypatch.setattr(run, "probe", lambda: NO_WALLS)
    monkeypatch.setattr(batch, "probe", lambda: NO_WALLS)
    (tmp_path / "submission").mkdir()
    document = run.grade(tmp_path)
    assert document["score"] == 0 and document["extra_data"]["autograder"]["status"] == "refused", document
    assert "cannot wall off the student's code" in document["output"], document["output"][:500]
    (tmp_path / "class" / "someone").mkdir(parents=True)
    with pytest.raises(SystemExit, match="refusing to grade: this machine cannot wall off"):
        batch.main([str(tmp_path / "class"), "--out", str(tmp_path / "out")])


def test_a_lab_reached_through_a_link_out_of_the_upload_is_refused(tmp_path: Path) -> None:
    from instructor.autograder.submission import locate

    other = make_student(tmp_path / "another-student", (LAB_03 / "solution.py").read_text(encoding="utf-8"))
    upload = tmp_path / "upload"
    (upload / IN_RELEASE).parent.mkdir(parents=True)
    (upload / IN_RELEASE).symlink_to(other / IN_RELEASE, target_is_directory=True)
    (tmp_path / "staging").mkdir()
    lab_03 = next(f for f in locate(upload, tmp_path / "staging") if f.lab == LAB_03.name)
    assert lab_03.file is None, "the other student's file must not be graded as this student's"
    assert "leads out of your upload through a link" in lab_03.problem, lab_03.problem


@pytest.mark.slow
@AS_THE_ORDINARY_USER
def test_a_batch_graded_by_an_ordinary_user_holds_a_fork_bomb(user_course: UserCourse) -> None:
    """`make grade-batch` run by an instructor as themself: a student who forks without bound, graded beside an
    honest one, earns nothing, costs the honest one nothing, and leaves no process of the user behind."""
    work = Path(tempfile.mkdtemp(prefix="walls-user-batch-"))
    try:
        make_student(work / "class" / "honest", (LAB_03 / "solution.py").read_text(encoding="utf-8"))
        make_student(work / "class" / "fork-bomb", (REPO_ROOT / DISHONEST / "forks_without_bound.py").read_text())
        (work / "out").mkdir()
        user_course.own(work)
        work.chmod(0o755)
        done = subprocess.run([*user_course.as_user, sys.executable, "-m", "instructor.autograder.batch",
                               str(work / "class"), "--out", str(work / "out"), "--labs", "03", "--jobs", "2"],
                              cwd=user_course.course, env=user_course.env(work / "out"), capture_output=True,
                              text=True, timeout=1200)
        assert done.returncode == 0, f"grade-batch as an ordinary user failed:\n{done.stdout}\n{done.stderr}"
        with (work / "out" / "scores.csv").open(encoding="utf-8") as handle:
            rows = {row["submission"]: row for row in csv.DictReader(handle)}
        honest = json.loads((work / "out" / "honest" / "results.json").read_text(encoding="utf-8"))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    assert rows["honest"]["status"] == "graded" and rows["honest"]["total"] == rows["honest"]["max"], rows["honest"]
    assert rows["fork-bomb"]["status"] == "graded" and rows["fork-bomb"]["total"] == "0", rows["fork-bomb"]
    if isolation.probe().kind == isolation.BWRAP:
        assert honest["extra_data"]["official"] is True, honest["extra_data"]["isolation"]
    # A process the grading killed may still be exiting when the batch returns (ps shows it as `[bwrap]`, its
    # command line already gone): give the kernel a few seconds to finish; a process left behind stays.
    deadline = time.monotonic() + 10
    while (left := running_processes_of(user_course.uid)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not left, f"the grading left processes of the grader's user running: {left}"


# A bubblewrap that cannot make namespaces, as in a container that forbids them (bwrap's own words).
FAILING_BWRAP = ("#!/bin/sh\necho 'bwrap: No permissions to create new namespace, likely because the kernel does "
                 "not allow non-privileged user namespaces.' >&2\nexit 1\n")


def failing_bwrap_path(folder: Path) -> str:
    """A PATH whose ``bwrap`` is :data:`FAILING_BWRAP`: the grader finds it by name, as it finds the real one."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "bwrap").write_text(FAILING_BWRAP, encoding="utf-8")
    (folder / "bwrap").chmod(0o755)
    folder.chmod(0o755)
    return f"{folder}{os.pathsep}{os.environ.get('PATH', '')}"


def test_where_bubblewrap_cannot_make_namespaces_a_root_grade_is_not_official_unless_its_own_user_holds(
        tmp_path: Path) -> None:
    """Found by trying at start: the grade still runs, and says what walled it and why it is not official."""
    run = run_jobs(LAB_03, [Job("reference", {"LAB_SANDBOX": "1", "PATH": failing_bwrap_path(tmp_path / "bin")})],
                   timeout=600)["reference"]
    extra = run.results.get("extra_data", {})
    assert run.tests and run.results["score"] == extra["max_score"] > 0, f"the reference is graded:\n{run.output}"
    said = extra["isolation"]
    assert not said.startswith("bubblewrap"), said
    if os.geteuid() == 0 and extra["official"]:  # a root grader whose own user for the child could read nothing
        assert said.startswith("a user id of its own"), said
    else:
        assert extra["official"] is False and "bubblewrap cannot make namespaces here" in said, said


@AS_THE_ORDINARY_USER
def test_where_bubblewrap_cannot_make_namespaces_an_ordinary_users_grade_is_not_official_and_batches_refuse(
        user_course: UserCourse) -> None:
    """An ordinary user cannot give the child another user id: `make grade` runs, marked not official, and
    grade-batch refuses to grade."""
    course = user_course.course
    scratch = Path(tempfile.mkdtemp(prefix="walls-no-namespaces-"))
    try:
        path = failing_bwrap_path(scratch / "bin")
        (scratch / "class" / "someone").mkdir(parents=True)
        user_course.own(scratch)
        scratch.chmod(0o755)
        runs = run_jobs(course / IN_RELEASE, [Job("reference", {
            "LAB_SANDBOX": "1", "PATH": path, "LAB_IMPL_03": str(course / IN_RELEASE / "solution.py")})],
                        timeout=600, as_user=user_course.as_user, owner=user_course.uid, course=course)
        batch_run = subprocess.run([*user_course.as_user, sys.executable, "-m", "instructor.autograder.batch",
                                    str(scratch / "class"), "--out", str(scratch / "out")], cwd=course,
                                   env={**user_course.env(scratch), "PATH": path}, capture_output=True, text=True,
                                   timeout=600)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    run = runs["reference"]
    extra = run.results.get("extra_data", {})
    assert run.tests and run.results["score"] == extra["max_score"] > 0, f"the grade still runs:\n{run.output}"
    assert extra["official"] is False, extra
    assert "bubblewrap cannot make namespaces here (bwrap: No permissions" in extra["isolation"], extra["isolation"]
    assert batch_run.returncode != 0 and "refusing to grade" in batch_run.stdout + batch_run.stderr, (
        batch_run.stdout + batch_run.stderr)


def running_processes_of(uid: int) -> list[str]:
    """The user's processes that still run: a zombie (state Z) has ended, and waits only for init to reap it (a
    sandbox's inner bubblewrap, reparented there when its monitor was killed with its group)."""
    listing = subprocess.run(["ps", "-u", str(uid), "-o", "pid=,stat=,args="], capture_output=True, text=True).stdout
    rows = [line.split(maxsplit=2) for line in listing.splitlines() if line.strip()]
    return [" ".join(row) for row in rows if len(row) > 1 and not row[1].startswith("Z")]
