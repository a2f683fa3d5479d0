"""The walls around the grading child: namespaces, a read-only view, an unprivileged user, limits.

Layers, each used where the machine allows it (:func:`probe` finds out once per process):

1. **Namespaces** (Linux, via util-linux's ``unshare``): a mount namespace in which the course
   is read-only and the lab folders, the tests, the instructor's tools, the results and ``/tmp``
   are replaced by empty file systems; a network namespace with no interface up (no network);
   a PID namespace, so every process the child forks dies with it.
2. **An unprivileged user** (``nobody``) when the grader runs as root, as on Gradescope: the
   child cannot write anything the grader owns, nor read what only root may.
3. **Resource limits** (``setrlimit``), everywhere: CPU seconds, data size, processes, file
   size and open files.

Without namespaces (macOS, a container that forbids them) the child keeps layers 2 and 3, and
the results file is still written only by the trusted process. :func:`describe` says which
layers a run had; it is stamped into every result.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os
import pwd
import resource
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Per child process. Generous for any honest lab, small enough that a runaway is stopped early.
LIMITS = {
    resource.RLIMIT_CPU: 600,  # seconds of CPU over the child's whole life
    resource.RLIMIT_DATA: 4 * 2**30,  # bytes of heap; RLIMIT_AS would also count the libraries' mappings
    resource.RLIMIT_FSIZE: 16 * 2**20,  # no file larger than 16 MiB
    resource.RLIMIT_NOFILE: 256,
}
MAX_PROCESSES = 64  # RLIMIT_NPROC counts per user: only meaningful once the child is its own user

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 1, 2, 4, 32, 4096, 16384, 1 << 18


@dataclass(frozen=True)
class Isolation:
    namespaces: bool
    drop_to: str | None  # the user the child becomes, when the grader is root

    def describe(self) -> str:
        layers = ["a separate process", "resource limits"]
        if self.namespaces:
            layers.insert(1, "mount, network and PID namespaces (course read-only, answers and tests hidden)")
        if self.drop_to:
            layers.insert(1, "an unprivileged user of its own")
        return ", ".join(layers)


@functools.cache
def probe() -> Isolation:
    """What this machine allows. ``LAB_SANDBOX_NAMESPACES=0`` turns the namespaces off (for comparison)."""
    drop_to = "nobody" if os.geteuid() == 0 and _has_user("nobody") else None
    namespaces = False
    if sys.platform.startswith("linux") and os.environ.get("LAB_SANDBOX_NAMESPACES", "1") != "0":
        unshare = shutil.which("unshare")
        if unshare:
            try:
                done = subprocess.run([*unshare_command(unshare), "true"], capture_output=True, timeout=10)
                namespaces = done.returncode == 0
            except (OSError, subprocess.SubprocessError):
                namespaces = False
    if drop_to and not namespaces and not all(readable_by_anyone(p) for p in reachable_paths()):
        drop_to = None  # without a mount namespace nothing can make a private interpreter reachable
    return Isolation(namespaces, drop_to)


def unshare_command(unshare: str | None = None) -> list[str]:
    command = [unshare or shutil.which("unshare") or "unshare", "--mount", "--net", "--pid", "--fork", "--kill-child"]
    if os.geteuid() != 0:  # a user namespace lets an ordinary user make the others
        command.insert(1, "--map-root-user")
    return command


def _has_user(name: str) -> bool:
    try:
        pwd.getpwnam(name)
        return True
    except KeyError:
        return False


# ------------------------------------------------------------------------ inside the child


def wall_off(hidden: list[str], read_only: list[str], reachable: list[str]) -> None:
    """In a fresh mount namespace: make ``read_only`` read-only, cover ``hidden`` and /tmp with empty ones."""
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)

    def mount(source: str, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
        if libc.mount(source.encode(), target.encode(), fstype.encode() if fstype else None, flags,
                      data.encode() if data else None) != 0:
            errno = ctypes.get_errno()
            raise OSError(errno, f"mount {target}: {os.strerror(errno)}")

    mount("none", "/", None, MS_REC | MS_PRIVATE)  # nothing done here leaks back to the host
    # A fresh, empty /tmp (and friends) for the child. The course itself may live below one of them
    # (a clone in /tmp): keep a handle on what must stay visible, cover, then mount it back in place.
    needed = sorted({p for p in (*read_only, *reachable) if os.path.isdir(p)}, key=len)  # outer folders first
    kept = {p: os.open(p, os.O_PATH) for p in needed if any(_below(p, s) for s in SCRATCH)}
    try:
        for scratch in SCRATCH:
            if os.path.isdir(scratch):
                mount("tmpfs", scratch, "tmpfs", MS_NOSUID | MS_NODEV, "size=64m,mode=1777")
        for path, handle in kept.items():
            os.makedirs(path, exist_ok=True)
            mount(f"/proc/self/fd/{handle}", path, None, MS_BIND | MS_REC)
    finally:
        for handle in kept.values():
            os.close(handle)
    for path in reachable:
        _make_reachable(Path(path), mount)
    for path in read_only:
        if os.path.isdir(path):
            mount(path, path, None, MS_BIND | MS_REC)
            mount(path, path, None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)
    for path in hidden:
        if os.path.isdir(path):
            mount("tmpfs", path, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV, "size=4k,mode=0555")


SCRATCH = ("/tmp", "/dev/shm", "/var/tmp")


def _below(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def _make_reachable(path: Path, mount: Any) -> None:
    """Let the unprivileged child reach ``path`` (the interpreter, say) when an ancestor is private.

    Python installed under root's home (pyenv) sits below ``/root``, which only root may enter. The
    ancestor is covered with an empty, enterable file system, and only the one entry on the way
    to ``path`` is mounted back into it: the rest of that home stays out of sight.
    """
    for depth in range(1, len(path.parts)):
        ancestor = Path(*path.parts[:depth])
        if ancestor.stat().st_mode & 0o001:
            continue
        entry = path.parts[depth]
        keep = os.open(ancestor / entry, os.O_PATH)  # a handle on what the cover is about to hide
        try:
            mount("tmpfs", str(ancestor), "tmpfs", MS_NOSUID | MS_NODEV, "size=4k,mode=0755")
            (ancestor / entry).mkdir()
            mount(f"/proc/self/fd/{keep}", str(ancestor / entry), None, MS_BIND | MS_REC)
        finally:
            os.close(keep)


def reachable_paths() -> list[str]:
    """What the child must be able to read: the interpreter, its libraries, and the course's engine."""
    wanted = [sys.base_prefix, sys.prefix, sys.executable,
              *(p for p in sys.path if p and ("site-packages" in p or "dist-packages" in p) and os.path.isdir(p))]
    # Each as written and as resolved: a venv reached through a symbolic link (an autograder's
    # venv -> the course's .venv) must exist at both places for the child's imports to find it.
    paths = {os.path.abspath(p) for p in wanted} | {os.path.realpath(p) for p in wanted}
    return sorted(p for p in paths if os.path.isdir(p))


def readable_by_anyone(path: str) -> bool:
    """Every folder on the way to ``path`` can be entered by other users."""
    parts = Path(os.path.realpath(path)).parts
    return all(Path(*parts[:depth]).stat().st_mode & 0o001 for depth in range(1, len(parts)))


# Each child becomes a user of its own from this range (no account needed: only a number), so the
# per-user process limit is that child's alone: what one fork bomb leaves behind for a moment after
# it is killed can never count against the next child, nor against another grading on the machine.
CHILD_UIDS = range(1_700_000, 1_800_000)
_next_uid = [CHILD_UIDS.start + (os.getpid() * 997) % len(CHILD_UIDS)]


def fresh_uid() -> int:
    """A user id no other grading child of this process uses (taken in turn from :data:`CHILD_UIDS`)."""
    uid = _next_uid[0]
    _next_uid[0] = CHILD_UIDS.start + (uid + 1 - CHILD_UIDS.start) % len(CHILD_UIDS)
    return uid


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


def become(user: str | None, uid: int | None = None) -> None:
    """Drop to ``uid`` (when root; ``user``'s group), then apply the limits; nothing after this can raise them."""
    if user is not None:
        entry = pwd.getpwnam(user)
        os.setgroups([])
        os.setgid(entry.pw_gid)
        os.setuid(uid if uid is not None else entry.pw_uid)
        os.environ["HOME"] = "/tmp"
        _limit(resource.RLIMIT_NPROC, MAX_PROCESSES)
    for kind, value in LIMITS.items():
        _limit(kind, value)


def _limit(kind: int, value: int) -> None:
    _soft, hard = resource.getrlimit(kind)
    if hard != resource.RLIM_INFINITY:
        value = min(value, hard)
    resource.setrlimit(kind, (value, value))


def private_paths(repo: Path) -> list[str]:
    """What graded code must not see in the course: answers, tests, tools, results, history."""
    labs = repo / "phase-16-serving-apis-and-parsers"
    names = [labs, repo / "tests", repo / "instructor", repo / ".git", repo / "build", repo / "mini_vllm" / "testing"]
    extra = [p for p in os.environ.get("LAB_SANDBOX_HIDE", "").split(os.pathsep) if p]
    return [str(p) for p in names] + extra
