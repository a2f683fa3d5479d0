"""``make grade-batch``: a class graded in fresh copies, in parallel, into one CSV.

A per-lab Gradescope export (``make grade-batch LABS=03``), graded as lab-03's own autograder grades it (a lone
``starter.py`` is lab-03's file, out of lab-03's points), each row's status in the student's words:

- solved, blank, a syntax error, partial (one task's function only), a group (two submitters, the lab's
  folder uploaded alone), lab-08's file uploaded to lab-03, and one whose every call loops forever;
- a metadata entry with no folder and a folder with no metadata: each a warning naming them.

Three tiny submissions of the whole course, graded as a two-lab assignment (``--labs 03,05``, to stay quick):

- ``blank``: the blank starters, a folder: 0 everywhere;
- ``one-lab``: lab-03 done, as a zip: lab-03's points only;
- ``broken``: lab-05 has a syntax error, and its lab-03 appends a "pass every test" hook to the
  course's ``conftest.py`` when imported; it earns nothing, and the hook cannot reach the other
  students, who are graded in copies of their own.

A run that crashes or overruns gets a row saying so.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import shutil
import zipfile
from pathlib import Path

import pytest

from instructor.autograder import batch, local, metadata
from instructor.contract import looping
from mini_vllm.labs import LABS_DIR, REPO_ROOT
from mini_vllm.testing.gradescope import validate
from mini_vllm.testing.policy import load_policy

IN_RELEASE = LABS_DIR.relative_to(REPO_ROOT)
SANDBOX_LANDED = (REPO_ROOT / "mini_vllm" / "sandbox").is_dir()
LAB_03 = next(LABS_DIR.glob("lab-03-*")).name
LAB_05 = next(LABS_DIR.glob("lab-05-*")).name
# Appended to the course's conftest.py by the tampering submission: every later test would pass.
TAMPER = '''
import contextlib, mini_vllm.labs as _labs
with contextlib.suppress(OSError):
    with open(_labs.REPO_ROOT / "conftest.py", "a") as _conftest:
        _conftest.write("\\ndef pytest_runtest_call(item):\\n    item.runtest = lambda: None\\n")
'''
# Grading a class as the autograder would (a Gradescope simulation): in make check, not make test.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("grade-batch")]


def copy_of_course(dest: Path, lab_03: str = "starter.py", lab_05: str | None = None, prefix: str = "") -> Path:
    for lab in (LAB_03, LAB_05):
        (dest / IN_RELEASE / lab).mkdir(parents=True, exist_ok=True)
    target_03 = dest / IN_RELEASE / LAB_03 / "starter.py"
    target_03.write_text(prefix + (LABS_DIR / LAB_03 / lab_03).read_text(encoding="utf-8"), encoding="utf-8")
    target_05 = dest / IN_RELEASE / LAB_05 / "starter.py"
    if lab_05 is None:
        shutil.copyfile(LABS_DIR / LAB_05 / "starter.py", target_05)
    else:
        target_05.write_text(lab_05, encoding="utf-8")
    return dest


@pytest.fixture(scope="module")
def graded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, dict[str, str]]]:
    submissions = tmp_path_factory.mktemp("submissions")
    copy_of_course(submissions / "blank")
    (submissions / "blank" / metadata.METADATA).write_text(json.dumps(METADATA), encoding="utf-8")
    one = copy_of_course(tmp_path_factory.mktemp("one") / "course", lab_03="solution.py")
    with zipfile.ZipFile(submissions / "one-lab.zip", "w") as archive:
        for path in sorted(one.rglob("*")):
            archive.write(path, path.relative_to(one))
    copy_of_course(submissions / "broken", lab_05="def oops(:\n", prefix=TAMPER)
    out = tmp_path_factory.mktemp("batch")
    assert batch.main([str(submissions), "--out", str(out), "--labs", "03,05", "--jobs", "2"]) == 0
    with (out / "scores.csv").open(encoding="utf-8") as handle:
        rows = {row["submission"]: row for row in csv.DictReader(handle)}
    return out, rows


# Gradescope's submission_metadata.json (the fields the CSV reads), for a group of two.
METADATA = {"id": 123456, "submission_method": "upload", "assignment": {"title": "lab-03"},
            "users": [{"name": "Ada Lovelace", "email": "ada@example.edu", "sid": "S001", "id": 1},
                      {"name": "Alan Turing", "email": "alan@example.edu", "sid": "S002", "id": 2}]}


def test_each_student_gets_a_row_and_a_valid_results_file(graded: tuple[Path, dict[str, dict[str, str]]]) -> None:
    out, rows = graded
    assert sorted(rows) == ["blank", "broken", "one-lab"]
    for student in rows:
        results = json.loads((out / student / "results.json").read_text(encoding="utf-8"))
        validate(results)
        assert results["extra_data"]["tests_version"] == rows[student]["tests_version"] == load_policy().tests_version
    header = list(rows["blank"])
    assert header[:7] == ["submission", "name", "email", "sid", "status", "total", "max"], header
    assert "lab-03" in header and "lab-03 task 2" in header, header


def test_names_emails_and_sids_come_from_gradescopes_metadata(
        graded: tuple[Path, dict[str, dict[str, str]]]) -> None:
    out, rows = graded
    blank = rows["blank"]
    assert (blank["name"], blank["email"], blank["sid"]) == (
        "Ada Lovelace; Alan Turing", "ada@example.edu; alan@example.edu", "S001; S002"), blank
    assert (rows["one-lab"]["name"], rows["one-lab"]["sid"]) == ("", ""), "no metadata: the folder's name alone"
    results = json.loads((out / "blank" / "results.json").read_text(encoding="utf-8"))
    assert "submission_metadata.json" not in json.dumps(results["extra_data"]["submission"]), (
        "the metadata is read by the batch, not graded as part of the upload")


# Gradescope's "Download Submissions" export names each folder's submitters beside the folders, in Ruby-style YAML.
EXPORT_YAML = """\
submission_101:
  :submitters:
  - :name: Grace Hopper
    :sid: '007'
    :email: grace@example.edu
  :created_at: 2026-11-30 10:00:00.000000000 -08:00
  :score: !ruby/object:BigDecimal 18:0.1e2
submission_102:
  :submitters:
  - :name: Ada Lovelace
    :sid: S001
    :email: ada@example.edu
  - :name: Alan Turing
    :sid: S002
    :email: alan@example.edu
"""


def test_names_come_from_the_exports_yaml_and_an_upload_cannot_overrule_it(tmp_path: Path) -> None:
    for folder in ("submission_101", "submission_102", "carol"):
        (tmp_path / folder).mkdir()
    (tmp_path / metadata.EXPORT_METADATA).write_text(EXPORT_YAML, encoding="utf-8")
    # submission_101 uploaded a metadata file of its own (someone else's SIDs): the export's names win
    for folder in ("submission_101", "carol"):
        (tmp_path / folder / metadata.METADATA).write_text(json.dumps(METADATA), encoding="utf-8")
    who = metadata.who_submitted(tmp_path, batch.students(tmp_path))
    assert who["submission_101"] == metadata.Submitter("Grace Hopper", "grace@example.edu", "007"), who
    assert who["submission_102"] == metadata.Submitter("Ada Lovelace; Alan Turing", "ada@example.edu; alan@example.edu",
                                                    "S001; S002"), "a group: every member, joined"
    assert who["carol"].sid == "S001; S002", "a folder the export does not name: the metadata in it, as before"


def test_the_scores_are_each_students_own(graded: tuple[Path, dict[str, dict[str, str]]]) -> None:
    _, rows = graded
    lab_03 = float(load_policy().lab("03").points)
    assert (rows["blank"]["status"], float(rows["blank"]["total"])) == ("graded", 0), rows["blank"]
    one = rows["one-lab"]
    assert (one["status"], float(one["total"]), float(one["lab-03"]), float(one["lab-05"])) == (
        "graded", lab_03, lab_03, 0), f"lab-03's points only, whoever was graded before: {one}"
    assert float(rows["broken"]["total"]) == 0, f"tampering with the course earns nothing: {rows['broken']}"


@pytest.mark.skipif(not SANDBOX_LANDED, reason="a lab that does not import costs only that lab once the sandbox "
                    "grades each lab in its own process (mini_vllm/sandbox, not merged yet)")
def test_a_syntax_error_costs_its_lab_and_says_so(graded: tuple[Path, dict[str, dict[str, str]]]) -> None:
    out, rows = graded
    status = rows["broken"]["status"]
    assert status.startswith("graded") and "lab-05 did not import" in status, rows["broken"]
    assert float(rows["broken"]["lab-05"]) == 0
    results = json.loads((out / "broken" / "results.json").read_text(encoding="utf-8"))
    assert "SyntaxError" in results["output"], results["output"][:2000]


def test_a_crashed_run_gets_a_row_that_says_so(tmp_path: Path) -> None:
    work = local.scratch_dir("test-batch-")
    try:
        template = batch.prepare_template(work)
        copy_of_course(tmp_path / "slow")
        outcome = batch.grade_one("slow", tmp_path / "slow", template, work, tmp_path / "out", timeout=0.5,
                                  labs="03")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    assert outcome.status == "crashed: grading did not finish within 0.5 s" and outcome.results is None
    batch.write_csv([outcome], tmp_path / "scores.csv")
    with (tmp_path / "scores.csv").open(encoding="utf-8") as handle:
        (row,) = list(csv.DictReader(handle))
    assert (row["submission"], row["status"], row["total"]) == ("slow", outcome.status, "0")


def test_grade_batch_needs_a_folder_of_submissions(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match=r"no student folder or \.zip"):
        batch.main([str(tmp_path)])


# ------------------------------------------------------------------ a per-lab export: LABS=03

LAB_08 = next(LABS_DIR.glob("lab-08-*")).name
SUBMITTERS = {
    "solved": [("Grace Hopper", "S1")], "blank": [("Ada Lovelace", "S2")], "broken": [("Alan Turing", "S3")],
    "partial": [("Barbara Liskov", "S4")], "group": [("Edsger Dijkstra", "S5"), ("Tony Hoare", "S6")],
    "wrong-lab": [("Frances Allen", "S7")], "hangs": [("John Backus", "S8")], "withdrawn": [("Kristen Nygaard", "S9")],
}


def export_yaml(submitters: dict[str, list[tuple[str, str]]]) -> str:
    """submission_metadata.yml as Gradescope writes it (Ruby-style keys), one entry per folder."""
    lines = []
    for folder, people in submitters.items():
        lines += [f"{folder}:", "  :submitters:"]
        for name, sid in people:
            lines += [f"  - :name: {name}", f"    :sid: '{sid}'", f"    :email: {sid.lower()}@example.edu"]
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def per_lab(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, dict[str, str]], str]:
    export = tmp_path_factory.mktemp("export")
    solution = (LABS_DIR / LAB_03 / "solution.py").read_text(encoding="utf-8")
    starter = (LABS_DIR / LAB_03 / "starter.py").read_text(encoding="utf-8")
    files = {
        "solved/starter.py": solution,
        "blank/starter.py": starter,
        "broken/starter.py": "def oops(:\n",
        "partial/starter.py": solution[:solution.index("\nclass StreamingDetokenizer")],  # task 1's function only
        f"group/{LAB_03}/starter.py": solution,
        "wrong-lab/starter.py": (LABS_DIR / LAB_08 / "solution.py").read_text(encoding="utf-8"),
        "hangs/starter.py": looping(starter),
        "stray/starter.py": starter,  # a folder the export's metadata does not name
    }
    for name, text in files.items():
        (export / name).parent.mkdir(parents=True, exist_ok=True)
        (export / name).write_text(text, encoding="utf-8")
    (export / metadata.EXPORT_METADATA).write_text(export_yaml(SUBMITTERS), encoding="utf-8")  # "withdrawn": no folder
    out = tmp_path_factory.mktemp("per-lab")
    warnings = io.StringIO()
    with contextlib.redirect_stderr(warnings):
        assert batch.main([str(export), "--out", str(out), "--labs", "03", "--jobs", "2"]) == 0
    with (out / "scores.csv").open(encoding="utf-8") as handle:
        rows = {row["submission"]: row for row in csv.DictReader(handle)}
    return out, rows, warnings.getvalue()


def test_a_per_lab_export_is_graded_as_that_labs_autograder(
        per_lab: tuple[Path, dict[str, dict[str, str]], str]) -> None:
    out, rows, _ = per_lab
    points = float(load_policy().lab("03").points)
    assert {float(row["max"]) for row in rows.values()} == {points}, "out of lab-03's points, not the course's"
    assert not [column for column in rows["solved"] if column.startswith("lab-") and not column.startswith("lab-03")]
    for student in rows:
        results = json.loads((out / student / "results.json").read_text(encoding="utf-8"))
        assert results["extra_data"]["autograder"]["assignment"] == ["lab-03"], "lab-03's own autograder"
        assert results["extra_data"]["autograder"]["labs_filter"] is None, "a whole grade, not a simulation"
    for student in ("solved", "group"):
        assert (rows[student]["status"], float(rows[student]["total"])) == ("graded", points), rows[student]
    assert (rows["blank"]["status"], float(rows["blank"]["total"])) == ("graded", 0), rows["blank"]
    partial = rows["partial"]
    assert partial["status"] == "graded" and 0 < float(partial["total"]) < points, partial
    assert float(partial["lab-03 task 1"]) > 0 and float(partial["lab-03 task 2"]) == 0, partial
    group = rows["group"]
    assert (group["name"], group["sid"]) == ("Edsger Dijkstra; Tony Hoare", "S5; S6"), group


def test_each_status_says_what_happened_in_the_students_words(
        per_lab: tuple[Path, dict[str, dict[str, str]], str]) -> None:
    out, rows, _ = per_lab
    broken = rows["broken"]
    assert broken["status"].startswith("did not import: SyntaxError"), broken
    wrong = rows["wrong-lab"]
    assert wrong["status"].startswith("a file of another lab: this file defines ") and float(wrong["total"]) == 0
    assert "`lift_to_bytes`" in wrong["status"] and "(lab-08), not lab-03's `utf8_expected_len`" in wrong["status"]
    hangs = rows["hangs"]
    assert (hangs["status"], float(hangs["total"])) == ("graded", 0), hangs
    outputs = {student: [t["output"] for t in json.loads((out / student / "results.json").read_text())["tests"]]
               for student in rows}
    assert all("does not import" not in o for o in outputs["hangs"]), "a budget overrun is not an import failure"
    assert all("is a file of another lab: this file defines" in o and "does not import" not in o
               for o in outputs["wrong-lab"]), f"each test says why, not an import failure: {outputs['wrong-lab'][:1]}"
    assert any("stopped after " in o and " s of CPU: utf8_expected_len" in o for o in outputs["hangs"]), (
        outputs["hangs"][:3])
    assert any("your lab-03 file defines no 'StreamingDetokenizer'" in o for o in outputs["partial"]), (
        outputs["partial"][-3:])
    for student, said in outputs.items():
        leaked = [o for o in said if "mini_vllm_labs" in o or "mini_vllm.sandbox." in o]
        assert not leaked, f"{student}: an internal module name reaches the student: {leaked[0][:300]}"


def test_metadata_and_folders_that_do_not_match_are_named(
        per_lab: tuple[Path, dict[str, dict[str, str]], str]) -> None:
    _, rows, warnings = per_lab
    assert "withdrawn" not in rows
    assert "names 1 submission(s) with no folder" in warnings and "withdrawn" in warnings, warnings
    assert "no metadata names 1 submission(s): stray" in warnings, warnings
    assert rows["stray"]["name"] == "" and rows["stray"]["status"] == "graded", rows["stray"]
