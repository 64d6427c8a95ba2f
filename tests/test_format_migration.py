"""Model files written by the format-1 release (commit 08de4da) still load and answer the same.

The files in ``tests/fixtures`` were written by ``tests/fixtures/make_v1_fixtures.py`` run on that
release; ``expected_v1.json`` holds the log densities it computed for ``query_v1.csv``.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from forestgen.base import GenerativeForest

FIX = Path(__file__).parent / "fixtures"


@pytest.mark.parametrize("name", ["arf", "gef", "rfde", "def"])
def test_v1_model_files_load_and_score_identically(name, tmp_path):
    path = FIX / f"{name}_v1.fgm"
    with zipfile.ZipFile(path) as zf:
        assert json.loads(zf.read("meta.json"))["format_version"] == 1
    model = GenerativeForest.load(path)
    q = pd.read_csv(FIX / "query_v1.csv")
    expected = json.loads((FIX / "expected_v1.json").read_text())[name]
    np.testing.assert_allclose(model.log_prob(q), expected, rtol=1e-12, atol=1e-12)
    # re-saved in the current format, it still answers the same
    again = GenerativeForest.load(model.save(tmp_path / "m.fgm"))
    np.testing.assert_allclose(again.log_prob(q), expected, rtol=1e-12, atol=1e-12)
