"""The autograder on this machine: an ``/autograder``-shaped root anywhere (``make test``, ``make grade-batch``).

Two things differ from Gradescope and are handled here:

- **Where.** Roots live under ``build/autograder-roots/``, in folders others may pass through but
  not list (0711), so where bubblewrap is missing one student's process cannot find another's
  root by listing. (With bubblewrap a child sees none of them: its root holds only the engine.)
- **This repository is on the same disk.** On Gradescope the reference solutions exist only in
  the autograder's own copy. Here the instructor's repository sits beside it, with the batch's
  ``autograder.zip`` in its ``build/``: a child never sees them under bubblewrap, and without it
  the grader checks that the child's user cannot read them either (``LAB_SANDBOX_PRIVATE``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from mini_vllm.labs import LABS_DIR, REPO_ROOT

ROOTS = REPO_ROOT / "build" / "autograder-roots"


def scratch_dir(prefix: str) -> Path:
    """A new folder for autograder roots, reachable by the sandboxed child and not listable by it."""
    ROOTS.mkdir(parents=True, exist_ok=True)
    path = Path(tempfile.mkdtemp(prefix=prefix, dir=ROOTS))
    path.chmod(0o711)
    return path


def instructor_private_paths() -> list[str]:
    """This repository's answers, tests, tools and builds (the batch's zip): out of the student's reach like the
    autograder's own."""
    return [str(p) for p in (LABS_DIR.parent, REPO_ROOT / "instructor", REPO_ROOT / "tests", REPO_ROOT / ".git",
                             REPO_ROOT / "mini_vllm" / "testing", REPO_ROOT / "build") if p.exists()]


def grading_env(root: Path, labs: str | None = None) -> dict[str, str]:
    """The environment for ``run_autograder`` in ``root``: nothing of the caller's choice of labs or pytest."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LAB_", "PYTEST_", "AUTOGRADER_"))}
    env["AUTOGRADER_ROOT"] = str(root)
    env["LAB_SANDBOX_PRIVATE"] = os.pathsep.join(instructor_private_paths())
    if labs:
        env["AUTOGRADER_LABS"] = labs
    return env


def install(zip_path: Path, root: Path) -> str:
    """What Gradescope does when it builds the autograder's image: unzip into ``root/source`` (file modes
    kept), ``run_autograder`` copied beside it, ``setup.sh`` run once. Here setup installs nothing: it uses
    this ``.venv`` after checking it holds the locked versions (``AUTOGRADER_EXISTING_VENV``). Its output."""
    root.mkdir(parents=True, exist_ok=True)
    root.chmod(0o711)
    with zipfile.ZipFile(zip_path) as zipped:
        for member in zipped.infolist():
            zipped.extract(member, root / "source")
            (root / "source" / member.filename).chmod((member.external_attr >> 16) & 0o777 or 0o644)
    shutil.copy2(root / "source" / "run_autograder", root / "run_autograder")
    env = {**os.environ, "AUTOGRADER_ROOT": str(root), "AUTOGRADER_EXISTING_VENV": sys.prefix}
    setup = subprocess.run(["bash", str(root / "source" / "setup.sh")], env=env, capture_output=True, text=True,
                           timeout=600)
    if setup.returncode != 0:
        raise RuntimeError(f"the autograder's setup.sh failed:\n{setup.stdout}{setup.stderr}")
    return setup.stdout
