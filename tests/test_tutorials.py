"""Execute the quickstart and NRGBoost notebooks on small subsamples (FORESTGEN_FAST=1)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

TUTORIALS = Path(__file__).resolve().parents[1] / "tutorials"


@pytest.mark.parametrize("name", ["01_quickstart.ipynb", "04_custom_components.ipynb",
                                  "05_nrgboost.ipynb"])
def test_notebook_runs(name, monkeypatch):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    monkeypatch.setenv("FORESTGEN_FAST", "1")
    nb = nbformat.read(TUTORIALS / name, as_version=4)
    client = nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                                     resources={"metadata": {"path": str(TUTORIALS)}})
    client.execute(env=dict(os.environ))
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
              if o.get("output_type") == "error"]
    assert not errors
