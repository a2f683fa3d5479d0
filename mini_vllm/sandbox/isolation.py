"""The walls around the grading child, in one place: what it sees, what crosses, its limits.

**What the child sees** is one allow-list, :func:`view`, handed to bubblewrap (``bwrap``, Debian's
``bubblewrap``), which starts the child in a root of its own that begins *empty* and holds only
what the list names, read-only: the system's programs and libraries (``/usr`` and its links), the
interpreter and its installed packages (each as Python writes its path and as it resolves: an
autograder's venv may be a link to the course's ``.venv``), and the course's engine (``mini_vllm``
without its testing kit). Besides them: a private, empty ``/tmp`` (64 MiB) and the child's own
``/proc`` and ``/dev`` (read-only: its device nodes, no tmpfs without a size to fill). The root itself is
remounted read-only once the list is in place, so ``/tmp`` (bounded, and counted in the child's memory by
:func:`mini_vllm.sandbox.costs.memory_held`) is the only place the child can write. Nothing else
of the host exists in there: no lab folder, no test, no fixture, no other course copy, no
autograder zip, no ``/run``, ``/var``, ``/home`` or ``/root``. The child has
its own user, IPC, network (no interface up), PID, UTS and cgroup namespaces, no capability,
``no_new_privs``, may make no user namespace of its own, and dies with the grader. bwrap makes
every mount before the child's code runs, in a namespace where the child holds no capability, so
no ``umount`` can undo one. The same walls hold whether the grader runs as root (Gradescope, CI)
or as an ordinary user; as root each child is first made a user id of its own (:func:`fresh_uid`),
so its process limit is its own and whatever it leaves running can be found and ended.

**What crosses** (:mod:`.remote`, :mod:`.wire`): three pipes (requests and replies each way, and a
control pipe the trusted side writes to interrupt a call), the submission's files as text (the
child never reads the course), the grader's environment variables (settings, no secret) and the
child's printed output, kept by the trusted side and shown under a failure.

**Limits**: :data:`LIMITS`, which the child sets on itself before it reads a line of the
submission (nothing can raise them again); each call's time budget is the trusted side's
(:mod:`.remote`).

Where bwrap cannot make namespaces (a container that forbids them), a grader running as root
still runs each child as a user id of its own, and :func:`probe` checks at start, by trying, that
this user can read none of the grader's private files (answers, tests, the autograder's zip:
``setup.sh`` makes them root's only). Where neither holds (macOS, an ordinary user without
bwrap) the child is a separate process with limits only, and the grade is marked not official
(:attr:`Walls.official`): ``make grade`` still runs, the autograder and batch grading refuse.
"""

from __future__ import annotations

import functools
import json
import os
import resource
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from mini_vllm.sandbox.policy import CHILD_UIDS, ENGINE_KEPT_OUT, LIMITS, MAX_PROCESSES, SCRATCH_BYTES, SYSTEM

REPO = Path(__file__).resolve().parents[2]

# ---------------------------------------------------------------------------------- the view (policy.py lists it)


@dataclass(frozen=True)
class Seen:
    """One entry of the child's view: ``path`` on the host, visible at the same path, read-only."""

    why: str
    path: str
    link_to: str | None = None  # a link on the host is made again as the same link


def view(trusted: bool = False, repo: Path = REPO) -> list[Seen]:
    """Everything the child sees besides its own /tmp, /proc and /dev: nothing of the host that is not here.

    ``trusted`` (the instructor's wrong variants and canaries, which are the reference with a
    change) sees the whole course, read-only.
    """
    seen: list[Seen] = []
    for path in SYSTEM:
        if os.path.islink(path):
            seen.append(Seen("the system", path, os.readlink(path)))
        elif os.path.exists(path):
            seen.append(Seen("the system", path))
    seen += [Seen("the interpreter and its packages", p) for p in interpreter_paths()]
    if trusted:
        seen.append(Seen("the whole course (trusted code only)", str(repo)))
    else:
        engine = repo / "mini_vllm"
        seen += [Seen("the engine", str(engine / name)) for name in sorted(os.listdir(engine))
                 if name not in ENGINE_KEPT_OUT]
    return _outermost(seen)


def interpreter_paths() -> list[str]:
    """The interpreter, its standard library and site-packages: as Python writes each path and as it resolves."""
    wanted = [sys.base_prefix, sys.prefix, os.path.dirname(sys.executable),
              *(p for p in sys.path if p and ("site-packages" in p or "dist-packages" in p) and os.path.isdir(p))]
    paths = {os.path.abspath(p) for p in wanted} | {os.path.realpath(p) for p in wanted}
    return sorted(p for p in paths if os.path.isdir(p))


def _outermost(seen: list[Seen]) -> list[Seen]:
    """Drop an entry that another one already shows (site-packages inside the venv)."""
    kept: list[Seen] = []
    for item in sorted(seen, key=lambda s: len(s.path)):
        if not any(k.link_to is None and _below(item.path, k.path) for k in kept):
            kept.append(item)
    return kept


def _below(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def bwrap_command(seen: list[Seen]) -> list[str]:
    """The child's walls as bwrap's arguments: namespaces, then an empty root filled from ``seen``."""
    command = [shutil.which("bwrap") or "bwrap",
               "--unshare-all", "--unshare-user",  # user, IPC, network, PID, UTS and cgroup namespaces
               *(["--disable-userns"] if _bwrap_has("--disable-userns") else []),  # no user namespace of its own
               "--die-with-parent", "--new-session", "--cap-drop", "ALL",
               "--proc", "/proc", "--dev", "/dev", "--remount-ro", "/dev",  # a tmpfs with no size: no writing there
               *(["--size", str(SCRATCH_BYTES)] if _bwrap_has("--size") else []), "--tmpfs", "/tmp",
               "--chdir", str(REPO)]  # python -m finds the engine here; the child then moves to /tmp
    for item in seen:  # after /tmp: a course that lives below /tmp is bound into the fresh one
        if item.link_to is not None:
            command += ["--symlink", item.link_to, item.path]
        else:
            command += ["--ro-bind", os.path.realpath(item.path), item.path]
    # Last, once every mount point is made in it: the root tmpfs itself read-only (bwrap sizes it at half the
    # host's RAM, and no figure of the child's memory counts it), so /tmp is the one place the child can write.
    return [*command, "--remount-ro", "/", "--"]


def as_user(uid: int, seen: list[Seen]) -> list[str]:
    """As root: become ``uid`` (and the group of that number, no other) before bwrap runs.

    The interpreter may live where other users cannot enter (pyenv below ``/root``): a first bwrap,
    still root, shows the host as it is but with each such folder replaced by an enterable one that
    holds only the way to what ``seen`` names.
    """
    covers = _covers(seen)
    prefix = [shutil.which("bwrap") or "bwrap", "--dev-bind", "/", "/", *covers, "--die-with-parent", "--"] \
        if covers else []
    return [*prefix, shutil.which("setpriv") or "setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--"]


def _covers(seen: list[Seen]) -> list[str]:
    args: list[str] = []
    covered: set[str] = set()
    for item in seen:
        if item.link_to is not None:
            continue
        for path in {item.path, os.path.realpath(item.path)}:
            parts = Path(path).parts
            private = next((depth for depth in range(1, len(parts)) if not _enterable(Path(*parts[:depth]))), None)
            if private is None:
                continue
            top = str(Path(*parts[:private]))
            if top not in covered:
                covered.add(top)
                args += ["--perms", "0755", "--tmpfs", top]
            for depth in range(private + 1, len(parts)):
                args += ["--perms", "0755", "--dir", str(Path(*parts[:depth]))]
            args += ["--ro-bind", os.path.realpath(path), path]
    return args


def _enterable(folder: Path) -> bool:
    return bool(folder.stat().st_mode & 0o001)


@functools.cache
def _bwrap_has(option: str) -> bool:
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return False
    try:
        return option in subprocess.run([bwrap, "--help"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return False


# ---------------------------------------------------------------------------------- what this machine allows

BWRAP, OWN_USER, PROCESS = "bubblewrap", "a user of its own", "a separate process"


@dataclass(frozen=True)
class Walls:
    kind: str  # BWRAP, OWN_USER or PROCESS
    as_root: bool  # the grader is root, so each child becomes a user id of its own
    why: str = ""  # why the grade is not official; empty when it is

    @property
    def official(self) -> bool:
        return not self.why

    @property
    def own_uid(self) -> bool:
        return self.as_root and self.kind != PROCESS

    def describe(self) -> str:
        if self.kind == BWRAP:
            text = ("bubblewrap: an empty, read-only root holding only the interpreter, its packages and the engine, "
                    "a private /tmp and /proc, a read-only /dev; its own user, IPC, network, PID, UTS and cgroup "
                    "namespaces; no capabilities; no_new_privs; dies with the grader")
            if self.as_root:
                text += "; a user id of its own"
        elif self.kind == OWN_USER:
            text = ("a user id of its own, which a try at start showed can read none of the grader's private files "
                    "(no namespaces on this machine)")
        else:
            text = "a separate process"
        text += "; resource limits"
        return text + (f". Not official: {self.why}" if self.why else "")


@functools.cache
def probe() -> Walls:
    """What this machine allows, found by trying once per process.

    ``LAB_SANDBOX_NAMESPACES=0`` skips bubblewrap (to see the fallbacks).
    """
    as_root = os.geteuid() == 0
    no_bwrap = _try_bwrap(as_root)
    if no_bwrap is None:
        return Walls(BWRAP, as_root)
    if not as_root:
        return Walls(PROCESS, False, f"{no_bwrap}, and the grader is not root, so the child cannot be another user")
    unreachable = [p for p in interpreter_paths() if not readable_by_anyone(p)]
    if unreachable:
        return Walls(PROCESS, True, f"{no_bwrap}, and the interpreter ({unreachable[0]}) is not readable by "
                                    "other users, so the child cannot be one")
    readable = _readable_by_a_fresh_user()
    if readable:
        return Walls(OWN_USER, True, f"{no_bwrap}, and a user of its own can read {readable[0]} "
                                     "(the grader's private files must be root's only, as setup.sh makes them)")
    return Walls(OWN_USER, True)


def _try_bwrap(as_root: bool) -> str | None:
    """None when bwrap walls a child here; else why not."""
    if not sys.platform.startswith("linux"):
        return f"bubblewrap needs Linux (this is {sys.platform})"
    if os.environ.get("LAB_SANDBOX_NAMESPACES", "1") == "0":
        return "LAB_SANDBOX_NAMESPACES=0 turned bubblewrap off"
    if shutil.which("bwrap") is None:
        return "bubblewrap is not installed (apt-get install bubblewrap)"
    if as_root and shutil.which("setpriv") is None:
        return "setpriv (util-linux) is missing, so the child cannot be made a user of its own"
    seen = view()
    uid = fresh_uid() if as_root else None
    command = [*(as_user(uid, seen) if uid is not None else []), *bwrap_command(seen), sys.executable, "-S", "-c", ""]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError) as error:
        return f"bubblewrap could not start ({error})"
    finally:
        if uid is not None:
            end_every_process_of(uid)
    if done.returncode != 0:
        said = (done.stderr.strip().splitlines() or ["no message"])[-1]
        return f"bubblewrap cannot make namespaces here ({said})"
    return None


def _readable_by_a_fresh_user() -> list[str]:
    """The grader's private paths that a fresh user id can open (a folder: list), found by trying as it."""
    paths = private_paths()
    uid = fresh_uid()
    script = ("import json, os, sys\n"
              "def opens(p):\n"
              "    try:\n"
              "        os.listdir(p) if os.path.isdir(p) else open(p, 'rb').close()\n"
              "        return True\n"
              "    except OSError:\n"
              "        return False\n"
              "print(json.dumps([p for p in json.loads(sys.argv[1]) if opens(p)]))\n")
    try:
        done = subprocess.run([sys.executable, "-S", "-c", script, json.dumps(paths)], capture_output=True, text=True,
                              timeout=30, user=uid, group=uid, extra_groups=[], cwd="/", stdin=subprocess.DEVNULL)
        return list(json.loads(done.stdout)) if done.returncode == 0 else [f"(the try failed: {done.stderr[-200:]})"]
    except (OSError, subprocess.SubprocessError, ValueError) as error:
        return [f"(the try failed: {error})"]
    finally:
        end_every_process_of(uid)


def private_paths(repo: Path = REPO) -> list[str]:
    """What a child without namespaces must not be able to read: answers, tests, tools, results, the zip.

    ``LAB_SANDBOX_PRIVATE`` adds more (the instructor's own repository beside a local autograder).
    """
    names = [repo / "phase-16-serving-apis-and-parsers", repo / "tests", repo / "instructor", repo / ".git",
             repo / "build", repo / "mini_vllm" / "testing", repo / "conftest.py", repo / "grading.toml"]
    extra = [p for p in os.environ.get("LAB_SANDBOX_PRIVATE", "").split(os.pathsep) if p]
    return [str(p) for p in names if p.exists()] + extra


def readable_by_anyone(path: str) -> bool:
    """Every folder on the way to ``path`` can be entered by other users."""
    parts = Path(os.path.realpath(path)).parts
    return all(_enterable(Path(*parts[:depth])) for depth in range(1, len(parts)))


# ---------------------------------------------------------------------------------- one child's life

# Each child of a root grader becomes a user of its own from CHILD_UIDS (no account needed: only a
# number), so the per-user process limit is that child's alone: what one fork bomb leaves behind for a
# moment after it is killed can never count against the next child, nor another grading on the machine.
_next_uid = [CHILD_UIDS.start + (os.getpid() * 997) % len(CHILD_UIDS)]


def fresh_uid() -> int:
    """A user id no other grading child of this process uses (taken in turn from :data:`CHILD_UIDS`)."""
    uid = _next_uid[0]
    _next_uid[0] = CHILD_UIDS.start + (uid + 1 - CHILD_UIDS.start) % len(CHILD_UIDS)
    return uid


def child_command(walls: Walls, python: list[str], trusted: bool, uid: int | None) -> list[str]:
    """The command that starts the child (the interpreter and arguments given) inside its walls."""
    if walls.kind == BWRAP:
        seen = view(trusted)
        return [*(as_user(uid, seen) if uid is not None else []), *bwrap_command(seen), *python]
    if walls.kind == OWN_USER and uid is not None:
        return [shutil.which("setpriv") or "setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--",
                *python]
    return python


def end_every_process_of(uid: int) -> None:
    """Kill whatever still runs as ``uid`` (a forked grandchild that escaped its process group)."""
    pid = os.fork()
    if pid == 0:  # the forked copy becomes that user and signals all of its processes, then leaves
        try:
            os.setuid(uid)
            os.kill(-1, 9)
        finally:
            os._exit(0)
    os.waitpid(pid, 0)


# ------------------------------------------------------------------------ inside the child


def limit_self(count_processes: bool) -> None:
    """Apply :data:`LIMITS` (and the process limit, where it counts this child's processes only)."""
    if count_processes:
        _limit(resource.RLIMIT_NPROC, MAX_PROCESSES)
    for kind, value in LIMITS.items():
        _limit(kind, value)


def counts_own_processes(walls: Walls) -> bool:
    """Whether RLIMIT_NPROC would count the child's processes only (not its user's others on the machine)."""
    if walls.own_uid:
        return True
    return walls.kind == BWRAP and _kernel_at_least(5, 14)  # per user namespace since 5.14


def _kernel_at_least(major: int, minor: int) -> bool:
    try:
        found = tuple(int(x) for x in os.uname().release.split("-")[0].split(".")[:2])
    except ValueError:
        return False
    return found >= (major, minor)


def _limit(kind: int, value: int) -> None:
    _soft, hard = resource.getrlimit(kind)
    if hard != resource.RLIM_INFINITY:
        value = min(value, hard)
    resource.setrlimit(kind, (value, value))
