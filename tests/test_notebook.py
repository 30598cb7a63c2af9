"""The notebook (docs/notebooks/replication-story.ipynb, docs/notebook.md) runs headless: executed
with nbclient in a kernel of this interpreter, from the repository's root, no cell fails and it
draws its pictures; the committed file carries no outputs, so its diffs stay small."""

from __future__ import annotations

import sys

import nbformat
from nbclient import NotebookClient

from conftest import ROOT

NOTEBOOK = ROOT / "docs" / "notebooks" / "replication-story.ipynb"
# Two runs (hw, kip101) of each of the three seed stories and the explore counterexample.
MIN_IMAGES = 7


def read():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbformat.validate(nb)
    return nb


def test_the_committed_notebook_has_no_outputs():
    nb = read()
    assert nb.metadata.kernelspec.name == "python3"
    code = [cell for cell in nb.cells if cell.cell_type == "code"]
    assert code
    for cell in code:
        assert cell.outputs == [] and cell.execution_count is None, f"clear the outputs of the cell {cell.source[:60]!r}"


def test_the_notebook_runs_headless_and_draws():
    nb = read()
    # docs/notebook.md's command is `jupyter execute`, which is this client; any cell's error raises
    # CellExecutionError, naming the cell and the traceback.
    NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(ROOT)}}).execute()
    outputs = [out for cell in nb.cells if cell.cell_type == "code" for out in cell.outputs]
    assert not [out for out in outputs if out.output_type == "error"]
    images = [out for out in outputs if "image/png" in out.get("data", {})]
    assert len(images) >= MIN_IMAGES, f"{len(images)} pictures drawn, expected at least {MIN_IMAGES}"
    printed = "".join(out.get("text", "") for out in outputs if out.output_type == "stream")
    assert f"kernel {sys.executable}\n" in printed, "the kernel is not this interpreter (the venv's python)"
