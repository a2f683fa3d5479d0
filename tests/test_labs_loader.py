"""The LAB_IMPL loader: one mechanism that decides whose code runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from mini_vllm import labs


def test_default_is_the_solution(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LAB_IMPL", raising=False)
    monkeypatch.delenv("LAB_IMPL_03", raising=False)
    assert labs.impl_path("lab-03").name == "solution.py"


def test_lab_impl_picks_the_file_and_per_lab_overrides_win(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LAB_IMPL", "starter")
    assert labs.impl_path("03").name == "starter.py"
    monkeypatch.setenv("LAB_IMPL_03", "solution")
    assert labs.impl_path("lab-03-streaming-detokenizer").name == "solution.py"


def test_a_path_can_be_loaded(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    submission = tmp_path / "mine.py"
    submission.write_text("ANSWER = 42\n")
    monkeypatch.setenv("LAB_IMPL_03", str(submission))
    monkeypatch.setenv("LAB_SANDBOX", "0")  # loaded here, as the notebooks and the server load it
    assert labs.load_lab("lab-03").ANSWER == 42


def test_missing_implementation_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LAB_IMPL", "submission")
    monkeypatch.setenv("LAB_SANDBOX", "0")
    with pytest.raises(FileNotFoundError, match="LAB_IMPL='submission'"):
        labs.load_lab("lab-03")


def test_missing_implementation_costs_that_lab_in_a_graded_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """Graded, a missing file is no collection error: each of the lab's tests fails saying what was looked for."""
    from mini_vllm.sandbox.remote import LabDoesNotImport

    monkeypatch.setenv("LAB_IMPL", "submission")
    monkeypatch.setenv("LAB_SANDBOX", "1")
    lab = labs.load_lab("lab-03")
    with pytest.raises(LabDoesNotImport, match="lab-03 has no file to grade: LAB_IMPL='submission'"):
        lab.StreamingDetokenizer(None)


@pytest.mark.parametrize("bad", ["3", "lab3", "lab-99", "../etc"])
def test_bad_lab_names_are_rejected(bad: str) -> None:
    with pytest.raises((ValueError, LookupError)):
        labs.lab_dir(bad)


def test_banner_says_whose_code_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LAB_IMPL", "starter")
    assert labs.describe_choice() == "LAB_IMPL=starter: grading YOUR code in starter.py"
    # The server and the notebooks run the code; only the tests grade it.
    assert labs.describe_choice("running") == "LAB_IMPL=starter: running YOUR code in starter.py"


def test_only_the_tests_claim_to_grade() -> None:
    """The server and every notebook print the banner with "running": they run your code, they do not grade it."""
    notebooks = labs.LABS_DIR.parent / "notebooks"
    printers = [labs.REPO_ROOT / "mini_vllm" / "__main__.py", *sorted(notebooks.glob("*.ipynb"))]
    claims = [p.name for p in printers if "describe_choice()" in p.read_text(encoding="utf-8")]
    assert not claims, f"these print 'grading YOUR code' where they only run it: {claims}"
