"""Execute the torch tutorials (02 augmentation with Lightning, 03 density prior) on small data."""

from __future__ import annotations

from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

TUTORIALS = Path(__file__).resolve().parents[1] / "tutorials"


@pytest.mark.parametrize("name", ["02_augmentation_lightning.ipynb", "03_density_prior.ipynb"])
def test_tutorial_runs(name, monkeypatch):
    monkeypatch.setenv("FORESTGEN_FAST", "1")
    path = TUTORIALS / name
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                                     resources={"metadata": {"path": str(TUTORIALS)}})
    client.execute()  # raises CellExecutionError (with the traceback) if any cell fails
    outputs = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code"
                      for o in c.get("outputs", []))
    assert "Error" not in outputs
