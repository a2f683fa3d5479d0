"""Grade one lab several times in one process: ``.venv/bin/python -m instructor.variants``.

The course checks each lab against many implementations: its blank starter, its canary (the
reference marking everything it returns) and its named wrong variants. A wrong variant
(``instructor/wrong_variants/lab_NN/<name>.py``) is the reference solution with one mistake. It
declares two lists:

- ``MUST_FAIL``: tests that must catch the mistake;
- ``MAY_COST``: the task numbers where it may lose points. A bug in task N must cost
  points in task N only, so every graded test of every other task must still pass.

So each variant runs its ``MUST_FAIL`` tests plus every graded test outside ``MAY_COST``;
the starter and the canary run everything. Grading them all in one interpreter pays
Python's start-up, the heavy imports and the loading of the real vocabularies once, not
once per grading; between gradings the lab's test module is dropped from ``sys.modules``
so its module-level ``lab = load_lab(...)`` picks up the next implementation.
"""

from __future__ import annotations

import ast
import gc
import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from mini_vllm.labs import forget_sandboxes, impl_path, lab_number


@dataclass(frozen=True)
class Variant:
    path: Path
    must_fail: tuple[str, ...]
    may_cost: tuple[int, ...]

    @classmethod
    def read(cls, path: Path) -> Variant:
        """The variant's declarations, read without importing it."""
        declared = {}
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    if isinstance(target, ast.Name) and target.id in ("MUST_FAIL", "MAY_COST"):
                        declared[target.id] = ast.literal_eval(node.value)
        missing = {"MUST_FAIL", "MAY_COST"} - declared.keys()
        if missing:
            raise ValueError(f"{path} must declare {sorted(missing)}")
        return cls(path, tuple(declared["MUST_FAIL"]), tuple(declared["MAY_COST"]))


class OnlyWhatTheVariantOwes:
    """Deselects what a variant's verdict does not need: its own tasks' other tests, and controls."""

    def __init__(self, variant: Variant) -> None:
        self.variant = variant

    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        keep: list[pytest.Item] = []
        drop: list[pytest.Item] = []
        for item in items:
            task = item.get_closest_marker("task")
            name = item.name.split("[")[0]
            owed = task is not None and (task.args[0] not in self.variant.may_cost or name in self.variant.must_fail)
            (keep if owed else drop).append(item)
        items[:] = keep
        config.hook.pytest_deselected(items=drop)


def run_reference_with_mistake(lab: str, mistake: dict[str, str], namespace: dict[str, Any]) -> None:
    """Run ``lab``'s reference solution, with each ``{right: wrong}`` piece of its text replaced, in ``namespace``.

    A variant that is "the reference with one mistake" is then three lines: the mistake,
    and ``run_reference_with_mistake("lab-06", MISTAKE, globals())``. Each ``right`` must
    occur exactly once, so a variant whose reference moved on fails loudly, not silently.
    """
    source = impl_path(lab, "solution").read_text(encoding="utf-8")
    for right, wrong in mistake.items():
        if source.count(right) != 1:
            raise ValueError(f"{right.strip()[:60]!r} is not in {lab}'s solution exactly once: update the variant")
        source = source.replace(right, wrong)
    exec(compile(source, namespace.get("__file__", lab), "exec"), namespace)


@dataclass(frozen=True)
class Job:
    """One grading: its name (its results go to ``<name>.json``), the environment it adds for
    its run only, and for a wrong variant the variant (it alone is loaded, and only what it
    owes is run)."""

    name: str
    env: dict[str, str] = field(default_factory=dict)
    variant: Path | None = None

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "env": self.env, "variant": str(self.variant) if self.variant else None}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Job:
        return cls(data["name"], data["env"], Path(data["variant"]) if data["variant"] else None)


def grade(lab_dir: Path, job: Job, results: Path) -> int:
    # What earlier gradings left (the vocabularies, the oracles' caches) is never garbage: frozen, so the
    # collections pytest runs at each session's end (and the interpreter's own) no longer walk it each time.
    gc.freeze()
    env = dict(job.env)
    plugins: list[object] = []
    if job.variant is not None:
        env[f"LAB_IMPL_{lab_number(lab_dir.name)}"] = str(job.variant)
        env["LAB_SANDBOX_TRUSTED"] = "1"  # the instructor's own file: the sandbox may ship it the reference
        plugins.append(OnlyWhatTheVariantOwes(Variant.read(job.variant)))
    for name, module in list(sys.modules.items()):  # the lab's test module, loaded for the last grading
        if Path(getattr(module, "__file__", None) or "/").parent == lab_dir:
            del sys.modules[name]
    # (No lab's test uses schemathesis's pytest plugin: -p no:schemathesis, as make grade and the autograder run.)
    args = [str(lab_dir), "-q", "--tb=no", "-p", "no:cacheprovider", "-p", "no:schemathesis", "--timeout", "120",
            "--assert=plain", "--grade", str(results)]
    saved = {key: os.environ.get(key) for key in env}
    os.environ.update(env)
    try:
        return int(pytest.main(args, plugins=plugins))
    finally:  # the next grading starts from the same environment, and with fresh grading children
        forget_sandboxes()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def main(argv: list[str]) -> int:
    """``lab_dir out_dir``: grade the jobs listed in ``out_dir/jobs.json``; ``<name>.json`` and
    ``<name>.exit`` hold each one's results and pytest exit code."""
    lab_dir, out_dir = (Path(a).resolve() for a in argv)
    os.environ["HYPOTHESIS_PROFILE"] = "contract"  # the ci examples (the graded verdicts), unshrunk
    for job in map(Job.from_json, json.loads((out_dir / "jobs.json").read_text(encoding="utf-8"))):
        print(f"=== job {job.name}", flush=True)
        code = grade(lab_dir, job, out_dir / f"{job.name}.json")
        sys.stdout.flush()
        (out_dir / f"{job.name}.exit").write_text(json.dumps(code))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
