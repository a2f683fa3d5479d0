"""What a student reads when a lab was not graded as it should: quick checks, without grading anything.

- A file of another lab is told apart by the names it defines (``instructor/autograder/labnames.py``), for
  every pair of labs; a lab's own file, blank or solved, is never taken for another lab's.
- The batch CSV's status, for one lab and for several (``graded_status``).
- Metadata and folders that do not match are named (``metadata_warnings``).

``tests/test_grade_batch.py`` grades a per-lab export end to end (slow).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from instructor.autograder import batch, labnames, metadata
from mini_vllm.labs import LABS_DIR

LABS = sorted(p.name for p in LABS_DIR.iterdir() if p.is_dir() and p.name.startswith("lab-"))


def test_every_lab_defines_a_name_no_other_lab_defines() -> None:
    names = labnames.lab_names()
    assert sorted(names) == [lab[:6] for lab in LABS]
    assert all(names.values()), f"a lab with no name of its own cannot be told apart: {names}"


@pytest.mark.parametrize("lab", LABS)
def test_a_labs_own_file_is_its_own(lab: str, tmp_path: Path) -> None:
    for kind in ("starter.py", "solution.py"):
        copy = tmp_path / kind
        copy.write_text((LABS_DIR / lab / kind).read_text(encoding="utf-8"), encoding="utf-8")
        assert labnames.other_lab(copy, lab) == "", f"{lab}'s {kind} taken for another lab's"


@pytest.mark.parametrize("other", LABS)
def test_another_labs_file_is_named_by_what_it_defines(other: str, tmp_path: Path) -> None:
    copy = tmp_path / "starter.py"
    copy.write_text((LABS_DIR / other / "solution.py").read_text(encoding="utf-8"), encoding="utf-8")
    for lab in LABS:
        said = labnames.other_lab(copy, lab)
        if lab == other:
            assert said == ""
            continue
        mine = labnames.lab_names()[lab[:6]][0]
        assert said.startswith("this file defines `") and f"({other[:6]}), not {lab[:6]}'s `{mine}`" in said, said


def test_a_file_that_does_not_parse_is_left_to_the_grading_run(tmp_path: Path) -> None:
    broken = tmp_path / "starter.py"
    broken.write_text("def lift_to_bytes(:\n", encoding="utf-8")
    assert labnames.other_lab(broken, LABS[0]) == "", "a syntax error is the grading run's to report"


def result(*labs: tuple[str, str, str]) -> dict[str, object]:
    return {"extra_data": {"autograder": {"status": "graded"},
                           "submission": {lab: {"status": status, "why": why} for lab, status, why in labs}}}


def test_the_status_is_in_the_students_words() -> None:
    wrong = ("lab-03", "another lab's file", "lab-03-streaming-detokenizer: starter.py is a file of another lab: "
             "this file defines `lift_to_bytes` (lab-08), not lab-03's `utf8_expected_len`. Upload lab-03's ...")
    assert batch.graded_status(result(("lab-03", "graded", ""))) == "graded"
    assert batch.graded_status(result(("lab-03", "not found", "..."))) == "no file for lab-03 found"
    broken = ("lab-03", "did not import", "SyntaxError: x")
    assert batch.graded_status(result(broken)) == "did not import: SyntaxError: x"
    assert batch.graded_status(result(wrong)) == (
        "a file of another lab: this file defines `lift_to_bytes` (lab-08), not lab-03's `utf8_expected_len`")
    several = batch.graded_status(result(("lab-03", "graded", ""), ("lab-05", "did not import", "SyntaxError: x"),
                                         ("lab-06", "not found", "...")))
    assert several == "graded; lab-05 did not import: SyntaxError: x; no file for lab-06 found", several
    crashed = {"extra_data": {"autograder": {"status": "crashed", "reason": "grading did not finish"}}}
    assert batch.graded_status(crashed) == "crashed: grading did not finish"


def test_metadata_and_folders_that_do_not_match_are_named(tmp_path: Path) -> None:
    for folder in ("submission_1", "submission_2", "stray", "own"):
        (tmp_path / folder).mkdir()
    (tmp_path / "own" / metadata.METADATA).write_text(json.dumps({"users": [{"name": "A", "sid": "1"}]}))
    (tmp_path / metadata.EXPORT_METADATA).write_text(
        "".join(f"{name}:\n  :submitters:\n  - :name: N\n    :sid: '1'\n"
                for name in ("submission_1", "submission_2", "submission_9")), encoding="utf-8")
    warnings = metadata.metadata_warnings(tmp_path, batch.students(tmp_path))
    assert len(warnings) == 2, warnings
    assert "names 1 submission(s) with no folder" in warnings[0] and "submission_9" in warnings[0], warnings
    assert warnings[1].startswith("grade-batch: warning: no metadata names 1 submission(s): stray"), warnings
