"""Every lesson notebook executes end to end (with the implementation LAB_IMPL selects)."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from mini_vllm.labs import LABS_DIR, describe_choice

NOTEBOOKS = sorted((LABS_DIR.parent / "notebooks").glob("*.ipynb"))


def test_every_lab_has_a_notebook() -> None:
    lab_numbers = {d.name[4:6] for d in LABS_DIR.glob("lab-*") if d.is_dir()}
    notebook_numbers = {nb.name[:2] for nb in NOTEBOOKS}
    assert lab_numbers <= notebook_numbers, f"labs without a notebook: {sorted(lab_numbers - notebook_numbers)}"


# make check (slow): ten kernels started and every cell run cost make test about 27 s of CPU (a tenth of it), and a
# notebook runs the same lab code its lab's tests already run in make test; `make notebooks` runs them all too.
@pytest.mark.slow
@pytest.mark.notebook
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_executes(path: Path) -> None:
    notebook = nbformat.read(path, as_version=4)
    # A kernel's start is a wall-clock wait: nbclient's 60 s default ran out once beside four busy workers.
    client = NotebookClient(notebook, timeout=300, startup_timeout=300, kernel_name="python3",
                            resources={"metadata": {"path": str(path.parent)}})
    client.execute()  # raises CellExecutionError, naming the cell, if any cell fails
    errors = [out for cell in notebook.cells for out in cell.get("outputs", []) if out.get("output_type") == "error"]
    assert not errors
    first_code = next(cell for cell in notebook.cells if cell.cell_type == "code")
    printed = "".join(out.get("text", "") for out in first_code.get("outputs", []))
    assert describe_choice("running") in printed, f"{path.name}: the first code cell must print whose code runs"
