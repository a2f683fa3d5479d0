"""Same code, same grade: the installed packages are the locked ones, and hypothesis draws the
same examples whatever else the run imported.

- :func:`check_installed` compares the version of every package in ``requirements/lock.txt``
  with what is installed. ``conftest.py`` calls it at start-up: a graded run (``--grade``)
  stops on a mismatch, any other run warns.
- :func:`freeze_hypothesis_constants` empties the pool of literals that hypothesis mines from
  every local module in ``sys.modules``. Left alone, that pool depends on which labs, solutions
  and helpers happen to be imported, and on when: ``make lab-02`` and ``make grade`` then draw
  different examples for the same test, and a test can pass under one and fail under the other.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING

from mini_vllm.labs import REPO_ROOT

if TYPE_CHECKING:  # importing hypothesis is left to the test processes
    from hypothesis.internal.constants_ast import Constants

LOCK_FILE = REPO_ROOT / "requirements" / "lock.txt"
FIX_COMMAND = "make install  (if that does not help: rm -rf .venv && make install)"
# The exit status of a graded run stopped by the check (pytest's own run from 0 to 5); the Makefile's
# verdict turns it into the fix.
UNLOCKED_EXIT = 6

# `name==version`, optionally followed by an environment marker and the hash continuation.
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)(?:\s*;\s*([^\\#]+))?")


def canonical_name(name: str) -> str:
    """PEP 503's normalized form: `Jinja2`, `jupyter_core` and `zope.interface` as pip compares them."""
    return re.sub(r"[-_.]+", "-", name).lower()


def read_lock(text: str) -> dict[str, str]:
    """Each pinned package of a lock file (``name==version`` lines), by canonical name."""
    pins = {}
    for line in text.splitlines():
        match = _PIN.match(line)
        if match and _applies(match.group(3)):
            pins[canonical_name(match.group(1))] = match.group(2)
    return pins


def _applies(marker: str | None) -> bool:
    """Whether a pin's environment marker holds here (the course's lock, resolved for one platform, has none)."""
    if not marker or not marker.strip():
        return True
    from packaging.markers import Marker

    return bool(Marker(marker.strip()).evaluate())


def installed_versions(paths: Iterable[str] | None = None) -> dict[str, str]:
    """Every distribution installed on ``paths`` (default: ``sys.path``), by canonical name.

    Read from the names of the ``NAME-VERSION.dist-info`` folders pip writes: reading each
    package's METADATA file instead (``importlib.metadata``) takes a third of a second for the
    course's 180 packages, in every test process and grading child.
    """
    versions: dict[str, str] = {}
    for entry in sys.path if paths is None else paths:
        try:
            folders = [f.name for f in os.scandir(entry or ".") if f.name.endswith(".dist-info")]
        except OSError:  # a zip file, or a path that does not exist
            continue
        for folder in sorted(folders):
            name, _, version = folder.removesuffix(".dist-info").partition("-")
            if not version:  # not a name pip wrote: ask the metadata itself
                dist = metadata.PathDistribution(Path(entry, folder))
                name, version = dist.metadata["Name"] or name, dist.version
            versions.setdefault(canonical_name(name), version)  # the first on sys.path wins, as for import
    return versions


def _same_version(a: str, b: str) -> bool:
    if a == b:
        return True
    from packaging.version import InvalidVersion, Version  # only for spellings that differ (1.0 vs 1.0.0)

    try:
        return Version(a) == Version(b)
    except InvalidVersion:
        return False


@dataclass(frozen=True)
class Mismatch:
    """A locked package that is missing or installed at another version."""

    name: str
    locked: str
    installed: str | None

    def __str__(self) -> str:
        return f"{self.name} {self.installed or 'is not installed'} (locked: {self.locked})"


def mismatches(locked: Mapping[str, str], installed: Mapping[str, str] | Callable[[str], str | None]) -> list[Mismatch]:
    """The locked packages whose installed version differs; packages the lock does not name are ignored
    (the course itself, tools someone added by hand)."""
    lookup = installed.get if isinstance(installed, Mapping) else installed
    found = []
    for name, version in sorted(locked.items()):
        have = lookup(name)
        if have is None or not _same_version(have, version):
            found.append(Mismatch(name, version, have))
    return found


@dataclass(frozen=True)
class InstallCheck:
    """What :func:`check_installed` found: a message to show, or nothing wrong."""

    problems: list[str]
    fix: str = FIX_COMMAND

    @property
    def ok(self) -> bool:
        return not self.problems

    def message(self, graded: bool) -> str:
        head = ("the installed packages are not the locked ones, so this grade could differ from the "
                "same code's grade elsewhere; grading stopped" if graded else
                "warning: the installed packages are not the locked ones (results may differ from CI)")
        shown = self.problems[:12]
        more = [f"... and {len(self.problems) - len(shown)} more"] if len(self.problems) > len(shown) else []
        return "\n".join([head + ":", *(f"  {p}" for p in shown + more), f"fix: {self.fix}"])


def locked_python(text: str) -> str | None:
    """The Python version the lock was resolved for, from the command in its header (``--python-version 3.11``)."""
    match = re.search(r"--python-version (\d+\.\d+)", text)
    return match.group(1) if match else None


def check_installed(lock_file: Path = LOCK_FILE, installed: Mapping[str, str] | None = None,
                    python: str | None = None) -> InstallCheck:
    """Compare ``lock_file`` with the installed distributions and the running Python (or ``installed``
    and the Python version in python, for tests)."""
    try:
        text = lock_file.read_text(encoding="utf-8")
    except FileNotFoundError:
        return InstallCheck([f"{lock_file} is missing, so nothing says which versions to install"],
                            fix="restore it from the course repository (git checkout -- requirements/lock.txt)")
    found = mismatches(read_lock(text), installed if installed is not None else installed_versions())
    problems = [str(m) for m in found]
    running = python or f"{sys.version_info.major}.{sys.version_info.minor}"
    wanted = locked_python(text)
    if wanted is not None and running != wanted:  # the same packages on another Python can still behave otherwise
        return InstallCheck([f"Python {running} (locked: {wanted})", *problems],
                            fix=f"rm -rf .venv && PYTHON=python{wanted} make install")
    return InstallCheck(problems)


def freeze_hypothesis_constants() -> None:
    """Make hypothesis draw from its own built-in constants only, never from literals of imported modules.

    Hypothesis (6.131 on) mixes into its draws literals read from the source of every "local"
    module in ``sys.modules`` (not the standard library, not site-packages, not test files), and
    reads ``sys.modules`` again whenever it has grown. Here that is the lab solutions, the
    starters, the student's own file, ``mini_vllm`` and the wrong variants: which of them are
    loaded, and when, depends on the command. Hypothesis has no setting for this pool, so the one
    function that builds it is replaced by one that returns a pool that stays empty. Every draw
    goes through that function (the provider of a test case, and the bare draws hypothesis makes
    when it looks for a new branch or shrinks), which a backend registered in
    ``AVAILABLE_PROVIDERS`` would not cover. The function is private: on a hypothesis version
    without it this stops, rather than silently drawing from the imports again.
    """
    from hypothesis.internal.conjecture import providers

    current = getattr(providers, "_get_local_constants", None)
    if isinstance(current, _FrozenPool):
        return
    if not callable(current) or not hasattr(providers, "Constants"):
        import hypothesis

        raise RuntimeError(f"hypothesis {hypothesis.__version__} builds its pool of module constants elsewhere: "
                           "update freeze_hypothesis_constants in mini_vllm/reproducible.py for it")
    providers._get_local_constants = _FrozenPool(providers.Constants())


@dataclass(frozen=True)
class _FrozenPool:
    """Stands in for hypothesis's ``_get_local_constants``: the same empty pool on every call."""

    pool: Constants

    def __call__(self) -> Constants:
        return self.pool
