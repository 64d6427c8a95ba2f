"""The leaderboard's likelihood on one base measure (benchmarks/leaderboard: basemeasure.py,
rarf_run.R) and the merge's same-code check."""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

HERE = Path(__file__).resolve().parents[2] / "benchmarks" / "leaderboard"
sys.path.insert(0, str(HERE))
from basemeasure import grid_halfwidths  # noqa: E402


def _table(n: int, rng: np.random.Generator) -> pd.DataFrame:
    z = np.round(rng.uniform(0.1, 50.0, n), 1)
    z[rng.random(n) < 0.4] = 0.0  # a point mass at 0 of a column on a 0.1 grid
    return pd.DataFrame({"age": rng.integers(20, 61, n), "x": rng.normal(size=n), "z": z,
                         "c": pd.Categorical(rng.choice(["a", "b"], n))})


def test_mass_cells_are_the_ones_arf_scores_as_masses():
    rng = np.random.default_rng(0)
    train, test = _table(300, rng), _table(40, rng)
    test.loc[0, "x"] = np.nan
    test["age"] = test["age"].astype(float)
    test.loc[1, "age"] = np.nan
    h = grid_halfwidths(train, test)
    assert list(h.columns) == list(test.columns)
    # an integer scale coded as levels: every observed held-out value is a mass, cell +-0.5
    assert (h.loc[test.age.notna(), "age"] == 0.5).all() and h.loc[1, "age"] == 0.0
    # the point mass of the 0.1-grid column: its cell is +-0.05; other values keep a density
    assert (h.loc[test.z == 0.0, "z"] == 0.05).all() and (h.loc[test.z != 0.0, "z"] == 0).all()
    assert (h["x"] == 0).all() and (h["c"] == 0).all()
    # integers coded as numbers (max_ordinal_levels=0): a density, no mass cells
    assert (grid_halfwidths(train, test, max_ordinal_levels=0)["age"] == 0).all()


def _rlib() -> Path | None:
    root = Path(os.environ.get("FORESTGEN_PEERS", Path.home() / ".cache" / "forestgen-peers"))
    return root / "Rlib" if (root / "Rlib" / "arf").exists() and shutil.which("Rscript") \
        else None


@pytest.mark.skipif(_rlib() is None, reason="R arf 0.2.4 not installed (FORESTGEN_PEERS/Rlib)")
def test_rarf_grid_probability_of_a_tiny_cell_is_density_times_width(tmp_path):
    """P(x - h < X <= x + h) ~ 2h f(x) as h -> 0: with h = 1e-6 on every numeric cell the grid
    log-likelihood is the normalised one plus log(2h) per numeric column."""
    rng = np.random.default_rng(1)
    df = pd.DataFrame({"u": rng.normal(size=120), "v": rng.normal(size=120) * 2 + 1,
                       "k": rng.choice(["p", "q"], 120)})
    df.iloc[:90].to_csv(tmp_path / "train.csv", index=False)
    df.iloc[90:].to_csv(tmp_path / "test.csv", index=False)
    grid = pd.DataFrame({"u": 1e-6, "v": 1e-6, "k": 0.0}, index=range(30))
    grid.to_csv(tmp_path / "grid.csv", index=False)
    subprocess.run(["Rscript", str(HERE / "rarf_run.R"), str(tmp_path / "train.csv"),
                    str(tmp_path / "test.csv"), str(tmp_path / "out"), "10", "5", "0", "50", "0",
                    str(tmp_path / "grid.csv")], check=True, capture_output=True,
                   env={**os.environ, "R_LIBS": str(_rlib())})
    res = json.loads((tmp_path / "out" / "result.json").read_text())
    assert res["n_grid_cells"] == 60
    assert res["test_ll_grid"] == pytest.approx(res["test_ll_normalised"] + 2 * math.log(2e-6),
                                                 abs=1e-3)


def test_same_code_needs_identical_default_samples(tmp_path):
    from run import check_same_code

    for name, text in (("a", "x\n1\n"), ("b", "x\n1\n"), ("c", "x\n2\n")):
        (tmp_path / f"{name}.csv").write_text(text)

    def rec(commit, synth, table="t"):
        return {"generator": "forestgen:arf", "status": "ok", "commit": commit, "table": table,
                "seed": 0, "synth": str(tmp_path / f"{synth}.csv")}

    assert check_same_code([rec("new", "a"), rec("old", "b")], "new", "old") == 1
    with pytest.raises(SystemExit, match="differ"):
        check_same_code([rec("new", "a"), rec("old", "c")], "new", "old")
    with pytest.raises(SystemExit, match="did not run at both"):
        check_same_code([rec("new", "a"), rec("old", "b", table="s")], "new", "old")
