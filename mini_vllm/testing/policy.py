"""The grading policy, read from ``grading.toml`` at the repository root.

One file says what a grade is made of, so the scorecard, ``results.json``, the autograder and
the sandbox cannot disagree: the points of each lab and of each of its tasks, which tests
Gradescope shows and when, the time budget of one call into student code, and the version of
the tests (stamped into every result, so a grade says which tests produced it).

Points are exact fractions here (a task's weight shared by its tests can be 70/42); rounding
happens once, where a number is printed or written.
"""

from __future__ import annotations

import functools
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

from mini_vllm.labs import REPO_ROOT, lab_number

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10 (Ubuntu 22.04, a Gradescope base image): the same parser, from PyPI
    import tomli as tomllib

POLICY_FILE = REPO_ROOT / "grading.toml"
# Gradescope's visibility choices, from least to most shown.
VISIBILITIES = ("hidden", "after_published", "after_due_date", "visible")
_TOP_KEYS = {"tests_version", "call_budget_s", "lab_points", "visibility", "stdout_visibility", "labs",
             "visibility_rules"}
_LAB_KEYS = {"points", "tasks", "call_budget_s"}
_RULE_KEYS = {"tests", "visibility"}


class PolicyError(ValueError):
    """grading.toml says something the course cannot grade by (the message names the key)."""


@dataclass(frozen=True)
class VisibilityRule:
    """Tests whose id matches ``pattern`` (``*`` and ``?`` wildcards) get ``visibility``."""

    pattern: str
    visibility: str

    def matches(self, test_id: str) -> bool:
        wildcards = re.escape(self.pattern).replace(r"\*", ".*").replace(r"\?", ".")
        return re.fullmatch(wildcards, test_id) is not None


@dataclass(frozen=True)
class LabPolicy:
    points: Fraction
    tasks: Mapping[int, Fraction] = field(default_factory=dict)  # empty: in proportion to the tests' points
    call_budget_s: float | None = None  # CPU seconds per call into the lab's code; None: the top-level one


@dataclass(frozen=True)
class Policy:
    tests_version: str
    call_budget_s: float
    lab_points: Fraction
    visibility: str = "visible"
    stdout_visibility: str = "hidden"
    labs: Mapping[str, LabPolicy] = field(default_factory=dict)  # by "lab-NN"
    visibility_rules: tuple[VisibilityRule, ...] = ()
    source: Path | None = None

    def lab(self, lab: str) -> LabPolicy:
        """The policy of one lab; a lab grading.toml does not name weighs ``lab_points``."""
        return self.labs.get(f"lab-{lab_number(lab)}", LabPolicy(self.lab_points))

    def budget_of(self, lab: str) -> float:
        """CPU seconds one call into ``lab``'s code may use: its own ``call_budget_s``, else the top-level one."""
        own = self.lab(lab).call_budget_s
        return own if own is not None else self.call_budget_s

    def task_weights(self, lab: str, test_points: Mapping[int, int]) -> dict[int, Fraction]:
        """The points of each task of ``lab``, given the tests' own points per task (``@task(n, points=k)``).

        A lab with explicit task weights must name exactly the tasks its tests have: a task
        added to the tests but not to the policy would otherwise be worth nothing, silently.
        Without them, tasks share the lab's points in proportion to their tests' points.
        """
        policy = self.lab(lab)
        if policy.tasks:
            if set(policy.tasks) != set(test_points):
                raise PolicyError(
                    f"grading.toml [labs.lab-{lab_number(lab)}] weighs tasks {sorted(policy.tasks)}, "
                    f"but the lab's tests grade tasks {sorted(test_points)}: give every task a weight")
            return dict(policy.tasks)
        total = sum(test_points.values())
        return {task: policy.points * points / total for task, points in test_points.items()} if total else {}

    def visibility_of(self, test_id: str) -> str:
        """Gradescope visibility of a test by its id (``lab-NN task N test_name[params]``): the last matching rule's."""
        chosen = self.visibility
        for rule in self.visibility_rules:
            if rule.matches(test_id):
                chosen = rule.visibility
        return chosen


def test_id(lab: str, task: int, name: str) -> str:
    """How ``visibility_rules`` name a test: ``lab-04 task 2 test_name[params]``."""
    return f"lab-{lab_number(lab)} task {task} {name}"


@functools.cache
def load_policy(path: Path = POLICY_FILE) -> Policy:
    """Read and check the policy file (cached: it is read once per process)."""
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise PolicyError(f"no grading policy at {path}: the course ships grading.toml at its root") from None
    except tomllib.TOMLDecodeError as error:
        raise PolicyError(f"{path.name} is not valid TOML: {error}") from None
    return parse_policy(raw, source=path)


def parse_policy(raw: Mapping[str, Any], source: Path | None = None) -> Policy:
    _no_unknown_keys(raw, _TOP_KEYS, "the top level")
    version = raw.get("tests_version")
    if not isinstance(version, str) or not version.strip():
        raise PolicyError("grading.toml: tests_version must be a non-empty string (it is stamped into every result)")
    budget = _seconds(raw.get("call_budget_s", 2), "call_budget_s")
    lab_points = _points(raw.get("lab_points", 100), "lab_points")
    labs = {}
    for name, table in raw.get("labs", {}).items():
        where = f"[labs.{name}]"
        if not re.fullmatch(r"lab-\d\d", name):
            raise PolicyError(f"grading.toml: {where}: labs are named lab-NN (e.g. lab-03)")
        _no_unknown_keys(table, _LAB_KEYS, where)
        points = _points(table.get("points", lab_points), f"{where} points")
        tasks = {_task_number(task, where): _points(weight, f"{where} tasks.{task}")
                 for task, weight in table.get("tasks", {}).items()}
        if tasks and sum(tasks.values()) != points:
            raise PolicyError(f"grading.toml: {where}: the task weights add up to {float(sum(tasks.values())):g}, "
                              f"not the lab's {float(points):g} points")
        own_budget = _seconds(table["call_budget_s"], f"{where} call_budget_s") if "call_budget_s" in table else None
        labs[name] = LabPolicy(points, tasks, own_budget)
    rules = []
    for index, rule in enumerate(raw.get("visibility_rules", [])):
        where = f"visibility_rules[{index}]"
        _no_unknown_keys(rule, _RULE_KEYS, where)
        if not isinstance(rule.get("tests"), str):
            raise PolicyError(f"grading.toml: {where}: 'tests' is a pattern such as \"lab-04 task 2 *\"")
        rules.append(VisibilityRule(rule["tests"], _visibility(rule.get("visibility"), where)))
    return Policy(
        tests_version=version.strip(),
        call_budget_s=float(budget),
        lab_points=lab_points,
        visibility=_visibility(raw.get("visibility", "visible"), "visibility"),
        stdout_visibility=_visibility(raw.get("stdout_visibility", "hidden"), "stdout_visibility"),
        labs=labs,
        visibility_rules=tuple(rules),
        source=source,
    )


def _seconds(value: Any, where: str) -> float:
    if not isinstance(value, (int, float)) or isinstance(value, bool) or value <= 0:
        raise PolicyError(f"grading.toml: {where} must be a positive number of seconds, not {value!r}")
    return float(value)


def _no_unknown_keys(table: Any, known: set[str], where: str) -> None:
    if not isinstance(table, Mapping):
        raise PolicyError(f"grading.toml: {where} must be a table")
    unknown = sorted(set(table) - known)
    if unknown:  # a typo would otherwise be a policy silently not applied
        raise PolicyError(f"grading.toml: unknown key(s) {unknown} in {where}; the keys are {sorted(known)}")


def _points(value: Any, where: str) -> Fraction:
    if isinstance(value, bool) or not isinstance(value, (int, float, Fraction)) or value <= 0:
        raise PolicyError(f"grading.toml: {where} must be a positive number, not {value!r}")
    return Fraction(value).limit_denominator(10_000)  # 12.5 stays 25/2, not a binary fraction


def _task_number(key: str, where: str) -> int:
    if not key.isdigit():
        raise PolicyError(f"grading.toml: {where} tasks are numbered (1 = 20, 2 = 30, ...), not {key!r}")
    return int(key)


def _visibility(value: Any, where: str) -> str:
    if value not in VISIBILITIES:
        raise PolicyError(f"grading.toml: {where} must be one of {list(VISIBILITIES)}, not {value!r}")
    return str(value)
