"""``make autograder``: the Gradescope autograder zip, ``build/autograder.zip``.

At the zip's root, as Gradescope requires: ``setup.sh`` and ``run_autograder``. Beside them,
``course/``: the files of this repository the grader needs (the engine, the labs with their
tests, reference solutions and data, the policy, the lock file, the pytest configuration and the
autograder's own code), stamped with ``build-info.json`` (the commit it was built from). Notebooks,
benchmarks, the course's own tests and the rest of the instructor's tooling stay out.

Files are taken from the working tree as git lists them (tracked, plus new files not ignored), so
a build never picks up a virtual environment, caches or someone's scratch files.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from mini_vllm.labs import REPO_ROOT
from mini_vllm.testing.provenance import BUILD_INFO, write_build_info

HERE = Path(__file__).resolve().parent
DEFAULT_OUT = REPO_ROOT / "build" / "autograder.zip"
# What the grader needs, as paths (or folders) relative to the repository root.
SHIPPED = (
    "pyproject.toml",
    "grading.toml",
    "conftest.py",
    "LICENSE",
    "requirements/",
    "mini_vllm/",
    "phase-16-serving-apis-and-parsers/labs/",
    "instructor/__init__.py",
    "instructor/autograder/",
)
# Never inside, even when listed above: the builders and the batch grader run on the instructor's machine.
LEFT_OUT = ("instructor/autograder/build.py", "instructor/autograder/batch.py")
ZIP_ROOT_SCRIPTS = ("setup.sh", "run_autograder")


def listed_files(root: Path = REPO_ROOT) -> list[str]:
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=root, capture_output=True,
                            check=True).stdout.decode().split("\0")
    return sorted(f for f in listed if f and (root / f).is_file() and _shipped(f))


def _shipped(path: str) -> bool:
    if path in LEFT_OUT or "/__pycache__/" in f"/{path}":
        return False
    return any(path == s or (s.endswith("/") and path.startswith(s)) for s in SHIPPED)


def build(out: Path = DEFAULT_OUT) -> Path:
    files = listed_files()
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(out.name + ".partial")
    with tempfile.TemporaryDirectory() as scratch, zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as zipped:
        for script in ZIP_ROOT_SCRIPTS:
            _add(zipped, HERE / script, script, executable=True)
        for name in files:
            _add(zipped, REPO_ROOT / name, f"course/{name}", executable=(REPO_ROOT / name).stat().st_mode & 0o111 != 0)
        write_build_info(Path(scratch), "autograder")
        _add(zipped, Path(scratch) / BUILD_INFO, f"course/{BUILD_INFO}")
    partial.replace(out)
    return out


def _add(zipped: zipfile.ZipFile, source: Path, name: str, executable: bool = False) -> None:
    info = zipfile.ZipInfo(name, date_time=(2026, 1, 1, 0, 0, 0))  # a fixed date: the same files, the same zip
    info.external_attr = (0o100755 if executable else 0o100644) << 16
    info.compress_type = zipfile.ZIP_DEFLATED
    zipped.writestr(info, source.read_bytes())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    out = build(parser.parse_args(argv).out)
    with zipfile.ZipFile(out) as zipped:
        count = len(zipped.namelist())
    print(f"{out.relative_to(REPO_ROOT) if out.is_relative_to(REPO_ROOT) else out}: {count} files, "
          f"{out.stat().st_size / 2**20:.1f} MiB. Upload it as the assignment's autograder on Gradescope "
          "(Ubuntu 22.04 base image); TEACHING.md says how.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
