"""The leaderboard's likelihood on one base measure (benchmarks/leaderboard: basemeasure.py,
rarf_run.R) and the merge's same-code check."""

from __future__ import annotations

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
from basemeasure import mass_cells  # noqa: E402


def _table(n: int, rng: np.random.Generator) -> pd.DataFrame:
    z = np.round(rng.uniform(0.1, 50.0, n), 1)
    z[rng.random(n) < 0.4] = 0.0  # a point mass at 0 of a column on a 0.1 grid
    return pd.DataFrame({"age": rng.integers(20, 61, n), "x": rng.normal(size=n), "z": z,
                         "f": rng.choice([17.5, 22.0, 27.0, 32.0], n),  # few levels, 0.1 grid
                         "c": pd.Categorical(rng.choice(["a", "b"], n))})


def test_mass_cells_are_the_ones_arf_scores_as_masses():
    rng = np.random.default_rng(0)
    train, test = _table(300, rng), _table(40, rng)
    test.loc[0, "x"] = np.nan
    test["age"] = test["age"].astype(float)
    test.loc[1, "age"], test.loc[2, "age"], test.loc[3, "age"] = np.nan, 30.0, 20.0
    test.loc[4, "f"] = 22.0
    lo, hi = mass_cells(train, test)
    assert list(lo.columns) == list(test.columns)
    # an integer scale coded as levels: the values that round to the level
    assert (lo.loc[2, "age"], hi.loc[2, "age"]) == (29.5, 30.5)
    assert (lo.loc[3, "age"], hi.loc[3, "age"]) == (-np.inf, 20.5)  # the lowest level
    assert np.isnan(lo.loc[1, "age"]) and lo["age"].notna().sum() == 39
    # few float levels: the midpoints to the neighbouring levels
    assert (lo.loc[4, "f"], hi.loc[4, "f"]) == (19.75, 24.5)
    # the point mass of the 0.1-grid column: its grid cell; other values keep a density
    zero = test.z == 0.0
    assert np.allclose(lo.loc[zero, "z"], -0.05) and np.allclose(hi.loc[zero, "z"], 0.05)
    assert lo.loc[~zero, "z"].isna().all() and lo["x"].isna().all() and lo["c"].isna().all()
    # integers coded as numbers (max_ordinal_levels=0): a density, no mass cells
    assert mass_cells(train, test, max_ordinal_levels=0)[0]["age"].isna().all()


def _rlib() -> Path | None:
    root = Path(os.environ.get("FORESTGEN_PEERS", Path.home() / ".cache" / "forestgen-peers"))
    return root / "Rlib" if (root / "Rlib" / "arf").exists() and shutil.which("Rscript") \
        else None


def _params(d: Path, test: pd.DataFrame) -> Path:
    """One tree split at u = 0: leaf 1 (-inf, 0], N(-1, 1), k = p; leaf 2 (0, inf], N(1, 1),
    k = p or q; half the rows each."""
    d.mkdir()
    pd.DataFrame({"f_idx": [1, 2], "variable": "u", "min": [-np.inf, 0.0],
                  "max": [0.0, np.inf], "mu": [-1.0, 1.0], "sigma": [1.0, 1.0]}).to_csv(
        d / "params_cnt.csv", index=False)
    pd.DataFrame({"f_idx": [1, 2, 2], "variable": "k", "val": ["p", "p", "q"],
                  "prob": [1.0, 0.5, 0.5]}).to_csv(d / "params_cat.csv", index=False)
    pd.DataFrame({"f_idx": [1, 2], "tree": [1, 1], "cvg": [0.5, 0.5]}).to_csv(
        d / "params_forest.csv", index=False)
    test.to_csv(d / "test_as_read.csv", index=False)
    return d


def test_rarf_mixture_closed_form(tmp_path):
    from rarf_cells import rarf_loglik
    from scipy.stats import norm

    test = pd.DataFrame({"u": [-0.5, 0.5, np.nan, 0.0, 0.5], "k": ["p", "q", "q", "p", None]})
    d = _params(tmp_path / "p", test)
    half = norm.cdf(0.0, loc=-1.0)  # each leaf's normal mass on its own side of 0
    dens = [0.5 * norm.pdf(-0.5, -1.0) / half, 0.5 * norm.pdf(0.5, 1.0) / half * 0.5,
            0.5 * 0.5,  # u missing: marginalised (factor 1); k = q only in leaf 2
            0.5 * norm.pdf(0.0, -1.0) / half,  # on the split: leaf 1's (min, max] holds it
            0.5 * norm.pdf(0.5, 1.0) / half]  # k missing: marginalised
    assert np.allclose(rarf_loglik(d), np.log(dens))
    lo = pd.DataFrame({"u": [-1.0, np.nan, np.nan, -np.inf, np.nan], "k": np.nan})
    hi = pd.DataFrame({"u": [1.0, np.nan, np.nan, np.inf, np.nan], "k": np.nan})
    # a cell across the split takes both leaves' share of it; the whole line has mass 1
    p1 = (norm.cdf(0.0, -1.0) - norm.cdf(-1.0, -1.0)) / half
    p2 = (norm.cdf(1.0, 1.0) - norm.cdf(0.0, 1.0)) / half
    cells = [0.5 * p1 * 1.0 + 0.5 * p2 * 0.5, dens[1], dens[2], 0.5 * 1.0 + 0.5 * 0.5,
             dens[4]]
    assert np.allclose(rarf_loglik(d, lo, hi), np.log(cells))


@pytest.mark.skipif(_rlib() is None, reason="R arf 0.2.4 not installed (FORESTGEN_PEERS/Rlib)")
def test_rarf_parameters_reproduce_lik(tmp_path):
    """From the parameters rarf_run.R writes, the mixture over every leaf is lik()'s
    normalised figure on a table without missing values, and a tiny cell around each numeric
    value has probability 2h times the density."""
    from rarf_cells import rarf_loglik

    rng = np.random.default_rng(1)
    df = pd.DataFrame({"u": rng.normal(size=120), "v": rng.normal(size=120) * 2 + 1,
                       "k": rng.choice(["p", "q"], 120)})
    df.iloc[:90].to_csv(tmp_path / "train.csv", index=False)
    df.iloc[90:].to_csv(tmp_path / "test.csv", index=False)
    subprocess.run(["Rscript", str(HERE / "rarf_run.R"), str(tmp_path / "train.csv"),
                    str(tmp_path / "test.csv"), str(tmp_path / "out"), "10", "5", "0", "50"],
                   check=True, capture_output=True, env={**os.environ, "R_LIBS": str(_rlib())})
    r = pd.read_csv(tmp_path / "out" / "test_ll.csv")["ll_normalised"].to_numpy()
    dens = rarf_loglik(tmp_path / "out")
    assert np.allclose(dens, r, atol=1e-9)
    t = df.iloc[90:].reset_index(drop=True)
    lo = pd.DataFrame({"u": t.u - 1e-6, "v": t.v - 1e-6, "k": np.nan})
    hi = pd.DataFrame({"u": t.u + 1e-6, "v": t.v + 1e-6, "k": np.nan})
    assert np.allclose(rarf_loglik(tmp_path / "out", lo, hi), dens + 2 * math.log(2e-6),
                       atol=1e-4)


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
