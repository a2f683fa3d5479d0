"""Does this interpreter have exactly the locked versions? setup.sh runs this file with the lock file's path.

setup.sh calls it in simulation (``AUTOGRADER_EXISTING_VENV``): an existing virtual environment is
used instead of installing, but only if it holds every locked package at its locked version, so
the simulated autograder runs what the real one would install. Exit 0 when it does, 1 with the
differences when it does not. It runs with the standard library only (plus ``packaging`` for
environment markers, when installed), since it may run before anything is installed.
"""

from __future__ import annotations

import re
import sys
from importlib import metadata
from pathlib import Path

PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?\s*==\s*([^\s;]+)\s*(?:;\s*(.+))?$")


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pins(lock_text: str) -> dict[str, tuple[str, str | None]]:
    """``name -> (version, marker)`` from a pip requirements lock (continuation lines and hashes allowed)."""
    joined = re.sub(r"\\\n", " ", lock_text)
    found = {}
    for raw in joined.splitlines():
        line = re.sub(r"\s--hash=\S+", "", raw.split(" #")[0]).strip()
        if not line or line.startswith(("#", "-")) or " @ " in line:
            continue  # comments, pip options (-e ., --index-url) and direct references are not version pins
        match = PIN.match(line)
        if match is None:
            raise SystemExit(f"lockcheck: not an exact pin (name==version): {line!r}")
        found[canonical(match.group(1))] = (match.group(2), match.group(3))
    return found


def applies(marker: str | None) -> bool:
    if not marker:
        return True
    try:
        from packaging.markers import Marker
    except ImportError:
        return True  # without packaging, check the pin anyway: a false alarm beats a silent skip
    return bool(Marker(marker).evaluate())


def differences(lock_text: str) -> list[str]:
    problems = []
    for name, (version, marker) in sorted(pins(lock_text).items()):
        if not applies(marker):
            continue
        try:
            installed = metadata.version(name)
        except metadata.PackageNotFoundError:
            problems.append(f"{name}: locked {version}, not installed")
            continue
        if installed != version:
            problems.append(f"{name}: locked {version}, installed {installed}")
    return problems


def main(argv: list[str]) -> int:
    lock = Path(argv[1])
    problems = differences(lock.read_text(encoding="utf-8"))
    if problems:
        print(f"{sys.executable} does not satisfy {lock}:\n  " + "\n  ".join(problems))
        return 1
    print(f"{sys.executable} satisfies {lock} ({len(pins(lock.read_text(encoding='utf-8')))} pins)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
