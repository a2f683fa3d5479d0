"""The LAB_IMPL loader: the one place that decides which implementation of a lab runs.

Tests, notebooks, benchmarks and the server all call :func:`load_lab`, so they always
agree on whose code is under test.

- ``LAB_IMPL`` names the module file loaded from each lab folder: ``solution`` (the
  default where the reference ships: the instructor's copy), ``starter`` (the default in the
  student's release, which has no ``solution.py``), or any other name (``LAB_IMPL=submission`` loads
  ``submission.py``, so an instructor can drop a student's file in and grade it).
- ``LAB_IMPL_03=...`` (any lab number) overrides the choice for that lab only, and
  may also be a path to a ``.py`` file anywhere. Useful when one lab composes
  another (lab-02 serves labs 01/03/04/05) and for running the tests on a variant.

Lab folders have hyphens in their names, so they are not importable packages; each
module is loaded from its file path under a unique, importable-looking name.
"""

from __future__ import annotations

import importlib.util
import os
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
LABS_DIR = REPO_ROOT / "phase-16-serving-apis-and-parsers" / "labs"
DEFAULT_IMPL = "solution"
# The order the course teaches the labs in: bytes, BPE tokens, the three text hold-backs, the server,
# then the typed event streams the server speaks to agents, then the sampler's side of the same seam.
RECOMMENDED_ORDER = ("03", "04", "05", "06", "01", "02", "10", "07", "08", "09")

_loaded: dict[Path, Any] = {}


def lab_dir(lab: str) -> Path:
    """The folder of a lab named by number (``"03"``, ``"lab-03"``) or full folder name."""
    number = lab_number(lab)
    matches = sorted(LABS_DIR.glob(f"lab-{number}-*"))
    if len(matches) != 1:
        raise LookupError(f"no single lab folder for {lab!r} under {LABS_DIR} (found {len(matches)})")
    return matches[0]


def lab_number(lab: str) -> str:
    match = re.fullmatch(r"(?:lab-)?(\d\d)(?:-[\w-]+)?", lab)
    if match is None:
        raise ValueError(f"not a lab name: {lab!r} (expected e.g. '03', 'lab-03' or 'lab-03-streaming-detokenizer')")
    return match.group(1)


def default_impl() -> str:
    """``solution`` where the reference solutions ship (the instructor's copy), else ``starter``.

    The student's release has no ``solution.py``: there the notebooks, the
    server and the demo run the student's own code unless told otherwise.
    """
    return DEFAULT_IMPL if any(LABS_DIR.glob(f"lab-*/{DEFAULT_IMPL}.py")) else "starter"


def chosen_impl(lab: str) -> str:
    """What the environment asks for: ``LAB_IMPL_<NN>``, else ``LAB_IMPL``, else :func:`default_impl`."""
    return (os.environ.get(f"LAB_IMPL_{lab_number(lab)}") or os.environ.get("LAB_IMPL") or default_impl()).strip()


def reference_lab(lab: str) -> ModuleType | None:
    """The reference solution of ``lab``, or None in the student's release (which ships none)."""
    try:
        return load_lab(lab, DEFAULT_IMPL)  # type: ignore[no-any-return]  # an explicit impl: a module
    except FileNotFoundError:
        return None


def impl_path(lab: str, impl: str | None = None) -> Path:
    """The file that implements ``lab`` for ``impl`` (default: what the environment chose)."""
    impl = impl or chosen_impl(lab)
    is_path = impl.endswith(".py") or os.sep in impl
    path = Path(impl).expanduser().resolve() if is_path else lab_dir(lab) / f"{impl}.py"
    if not path.is_file():
        raise FileNotFoundError(f"LAB_IMPL={impl!r}: no file {path} to load for {lab}")
    return path


def sandboxed(lab: str, impl: str | None = None) -> bool:
    """Whether ``load_lab(lab, impl)`` runs the code in the grading sandbox rather than in this process.

    ``LAB_SANDBOX=1`` (every graded run: ``make grade``, ``make lab-03`` and the other labs, the autograder) sandboxes
    the implementation the environment chose, the reference included; ``auto`` (the test suite's
    default) sandboxes every choice but the reference; unset or ``0`` (notebooks, the server, the
    benchmarks) runs everything here. An explicit ``impl`` (a test asking for the reference to
    build its expected values) is the caller's own choice and always runs here.
    """
    if impl is not None:
        return False
    mode = os.environ.get("LAB_SANDBOX", "0").strip()
    if mode == "1":
        return True
    return mode == "auto" and chosen_impl(lab) != DEFAULT_IMPL


def load_lab(lab: str, impl: str | None = None) -> Any:
    """Import and return the implementation module of ``lab`` (cached per file).

    In a graded run (:func:`sandboxed`) the module is imported in a sandboxed child process
    instead, and what comes back is a :class:`mini_vllm.sandbox.remote.RemoteLab` with the same
    names: the tests cannot tell, and the submission cannot reach them.
    """
    if sandboxed(lab, impl):
        return _remote_lab(lab)
    path = impl_path(lab, impl)
    module = _loaded.get(path)
    if module is None:
        stem = re.sub(r"\W", "_", path.stem)
        module = _loaded[path] = import_file(f"mini_vllm_labs.lab_{lab_number(lab)}.{stem}", path)
    return module


def import_file(name: str, path: Path) -> ModuleType:
    """Run the lab file ``path`` as the module ``name``: the one loader of lab files, here and in the grading child.

    The module is registered before it runs, as a normal import would be (dataclasses and pickling look their
    module up in ``sys.modules``), and forgotten again if it raises.
    """
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def _remote_lab(lab: str) -> Any:
    from mini_vllm.sandbox.remote import missing_lab, open_lab

    number = lab_number(lab)
    try:
        path = impl_path(lab)
    except FileNotFoundError as missing:
        return missing_lab(number, str(missing))
    key = Path(f"sandbox:{number}:{path}")
    remote = _loaded.get(key)
    if remote is None:
        remote = _loaded[key] = open_lab(number, path, _chosen_file, all_lab_numbers(), _reference_file,
                                         _reference_module, COMPOSED_STAGES.get(number, ()),
                                         TOKENIZERS_HANDED.get(number, ()))
    return remote


def all_lab_numbers() -> list[str]:
    return sorted(lab_number(p.name) for p in LABS_DIR.glob("lab-[0-9][0-9]-*") if p.is_dir())


def _chosen_file(number: str) -> Path | None:
    try:
        return impl_path(number)
    except (FileNotFoundError, LookupError):
        return None


def _reference_module(number: str) -> Any:
    """The reference of lab ``number``, loaded in this process (what a composing lab's proxy is served from)."""
    return load_lab(number, DEFAULT_IMPL)


def _reference_file(number: str) -> Path | None:
    try:
        return impl_path(number, DEFAULT_IMPL)
    except (FileNotFoundError, LookupError):
        return None


def forget_sandboxes() -> None:
    """Stop every grading child and forget its lab, so the next ``load_lab`` starts afresh."""
    from mini_vllm.sandbox.remote import stop_all

    stop_all()
    for key in [k for k in _loaded if str(k).startswith("sandbox:")]:
        del _loaded[key]


def lab_of_path(path: str | os.PathLike[str]) -> str | None:
    """``"lab-03"`` for any path or pytest node id inside a lab folder, else None."""
    match = re.search(r"(?:^|[/\\])(lab-\d\d)-[\w-]+[/\\]", str(path))
    return match.group(1) if match else None


# Labs whose tests run other labs' code through this loader: lab-02's pipeline composes these stages.
# (lab-07 formats recorded reference streams, so it composes nothing at run time.)
COMPOSED_STAGES = {"02": ("01", "03", "04", "05", "06")}

# The real tokenizers a lab's tests hand its code. A grading child rebuilds each from the vendor's files (both take
# 1.5 s of CPU), so such a lab's child is started as the tests are collected and loads them then, beside the test
# run rather than inside a test. A family missing here is loaded when it first crosses, only later.
TOKENIZERS_HANDED = {"02": ("mistral", "tekken"), "04": ("mistral", "tekken"), "10": ("mistral", "tekken")}


def graded_footer(labs: list[str]) -> str:
    """The last line of a test run over ``labs``: whose code was graded, even under ``-q``; and for a lab
    that composes others, whose stages it ran over (the student's own labs, unless the reference's)."""
    choices = {lab: chosen_impl(lab) for lab in labs}
    if len(set(choices.values())) == 1:
        line = "graded: " + _whose(next(iter(choices.values())))
    else:
        line = "graded: " + "; ".join(f"{lab} {_whose(impl)}" for lab, impl in choices.items())
    for lab in labs:
        stages = COMPOSED_STAGES.get(lab_number(lab))
        if stages is None:
            continue
        if os.environ.get("LAB_COMPOSE") == "reference":
            line += f" (lab-{lab_number(lab)} ran over the reference labs {', '.join(stages)})"
        else:
            used = sorted({_whose(chosen_impl(stage)).split(" ")[0] for stage in stages})
            line += f" (lab-{lab_number(lab)} ran over labs {', '.join(stages)}: {', '.join(used)}"
            if default_impl() != DEFAULT_IMPL:  # no reference formatter here: the pipeline's chunks are the student's
                line += "; its tasks 1, 2, 4 sent through your ChunkFormatter"
            line += ")"
    return line


def _whose(impl: str) -> str:
    if impl == "starter":
        return "starter.py (your code)"
    if impl == DEFAULT_IMPL:
        return "solution.py (the reference) — set LAB_IMPL=starter to test yours"
    return impl if impl.endswith(".py") else f"{impl}.py"


def describe_choice(doing: str = "grading") -> str:
    """One line for banners: which implementation runs, in a student's terms.

    ``doing`` is what the caller does with it: the tests grade it; the server and the
    notebooks only run it (``describe_choice("running")``), and must not claim to grade.
    """
    impl = os.environ.get("LAB_IMPL") or default_impl()
    if impl == "starter":
        line = f"LAB_IMPL=starter: {doing} YOUR code in starter.py"
    elif impl == DEFAULT_IMPL:
        line = "LAB_IMPL=solution: running the reference solutions (set LAB_IMPL=starter to run yours)"
    else:
        line = f"LAB_IMPL={impl}: {doing} {impl if impl.endswith('.py') else impl + '.py'}"
    overrides = sorted(k for k in os.environ if re.fullmatch(r"LAB_IMPL_\d\d", k))
    if overrides:
        line += " (overrides: " + ", ".join(f"{k}={os.environ[k]}" for k in overrides) + ")"
    return line
