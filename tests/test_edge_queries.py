"""Edge cases of the queries that a newcomer's probe found (stop 67): evidence of no rows, rows
with nothing observed, and the type of a classifier's ``predict``."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from scipy import stats

import forestgen as fg


def _table(n: int = 200, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=n)
    return pd.DataFrame({"x": x, "w": x + rng.normal(0, 0.5, n),
                         "cat": np.where(x + rng.normal(size=n) > 0, "u", "v")})


def _small(name: str):
    kw = {"random_state": 0}
    if name not in ("Chain", "Anchored"):
        kw["n_trees"] = 5
    if name == "NRGBoost":
        kw["max_leaves"] = 8
    return getattr(fg, name)(**kw)


@pytest.mark.parametrize("name", ["ARF", "GeF", "RFDE", "DEF", "GFBoost", "EOGT", "NRGBoost",
                                  "Chain", "Anchored"])
def test_per_row_conditions_of_no_rows_draw_no_rows(name):
    """``sample(conditions=<a DataFrame of 0 rows>)``: an empty frame with the model's columns
    (NRGBoost divided by its zero chains)."""
    df = _table()
    m = _small(name)
    m.fit(df, target="cat") if name == "GeF" else m.fit(df)
    out = m.sample(conditions=df.head(0)[["cat"]], random_state=0)
    assert out.shape == (0, 3) and list(out.columns) == list(df.columns)


def test_eogt_scores_a_row_with_nothing_observed_as_the_total_mass():
    """A row of NaN entries marginalises every column: ``log 1 = 0``, however many regions
    the forest has (at EOGT's larger sizes it went past ``max_regions`` and read NaN)."""
    df = _table()
    m = fg.EOGT(n_trees=3, n_iter=15, random_state=0).fit(df)
    m.max_regions = 2  # every row with a missing entry is past the cap
    q = df.head(2).copy()
    q.iloc[0, :] = np.nan
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lp = m.log_prob(q)
    assert lp[0] == 0.0 and np.isfinite(lp[1])


def test_eogt_sample_imputation_past_the_region_cap_is_the_same_law():
    """``impute(method="sample")`` of rows past ``max_regions`` draws from the conditional by
    :meth:`sample`'s rejection (they stayed missing before): the imputed values of one row
    repeated 600 times follow the same law as below the cap (two-sample KS), and the
    observed entries are kept."""
    df = _table(400)
    m = fg.EOGT(n_trees=3, n_iter=15, random_state=0).fit(df)
    q = pd.DataFrame({"x": [np.nan] * 600, "w": [0.3] * 600, "cat": [None] * 600})
    below = m.impute(q, method="sample", random_state=1)
    m.max_regions = 1
    past = m.impute(q, method="sample", random_state=2)
    assert past["x"].notna().all() and past["cat"].notna().all()
    assert (past["w"] == 0.3).all()
    assert stats.ks_2samp(below["x"], past["x"]).pvalue > 1e-3
    share = below["cat"].eq("u").mean(), past["cat"].eq("u").mean()
    assert abs(share[0] - share[1]) < 4 * np.sqrt(0.25 * 2 / 600)
    # a row with nothing observed is an unconditional draw, not left missing
    blank = m.impute(pd.DataFrame({"x": [np.nan], "w": [np.nan], "cat": [None]}),
                     method="sample", random_state=0)
    assert blank.notna().all(axis=None)


def test_gef_predict_is_a_series_like_every_learners():
    """GeF's ``predict`` of its class column returned a bare array (the index lost); it is a
    Series indexed like ``X``, named and typed like the column, as ARF's ``predict``."""
    df = _table()
    df["cat"] = df["cat"].astype("category")
    g = fg.GeF(n_trees=5, random_state=0).fit(df, target="cat")
    X = df.iloc[10:16]
    p = g.predict(X)
    proba = g.predict_proba(X)
    assert isinstance(p, pd.Series) and list(p.index) == list(X.index) and p.name == "cat"
    assert p.dtype == fg.ARF(n_trees=5, random_state=0).fit(df).predict(X, target="cat").dtype
    np.testing.assert_array_equal(p.astype(object).to_numpy(),
                                  proba.columns.to_numpy()[proba.to_numpy().argmax(1)])


@pytest.mark.parametrize("name", ["ARF", "RFDE", "DEF", "GFBoost", "EOGT", "NRGBoost", "Chain",
                                  "Anchored"])
def test_an_empty_table_is_refused_by_name(name):
    """No rows or no columns: a ValueError saying so (GF.Boost and EOGT divided by zero while
    choosing their sizes; GeF, supervised, names its missing class column first)."""
    for X in (pd.DataFrame({"a": np.array([], float), "b": np.array([], object)}),
              pd.DataFrame(index=range(5))):
        with pytest.raises(ValueError, match="empty table"):
            _small(name).fit(X)


@pytest.mark.parametrize("name", ["ARF", "Chain", "Anchored"])
def test_draws_rounded_to_zero_are_not_negative_zero(name):
    """A draw just below 0 rounded onto a whole-number column's grid read ``-0.0`` (written as
    "-0.0" to a CSV, a value no training row holds)."""
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"num": rng.normal(50, 10, 150).round(2),
                       "fi": rng.integers(0, 20, 150).astype(float)})
    s = _small(name).fit(df).sample(2000, random_state=0)["fi"]
    assert (s == 0).any() and not np.signbit(s[s == 0]).any()


@pytest.mark.parametrize("name", ["ARF", "RFDE", "GFBoost", "EOGT", "NRGBoost", "Chain",
                                  "Anchored"])
def test_an_infinite_query_value_is_one_row_outside_the_range(name):
    """``±inf`` in a query is a value outside the column's range, row by row, as ``1e308`` is:
    it scored that row, not ``ValueError`` for the whole batch (training data with ``inf`` is
    still refused by name). Per-row evidence outside the range returns its given value (a
    ``1e308`` on a grid of 0.01 came back ``inf``)."""
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"num": rng.normal(50, 10, 150).round(2),
                       "cat": rng.choice(["u", "v", "w"], 150)})
    m = _small(name).fit(df)
    q = df.head(3).copy()
    q.loc[1, "num"] = 1e308
    far = m.log_prob(q)
    q.loc[1, "num"] = np.inf
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        lp = m.log_prob(q)
        filled = m.impute(q.assign(cat=[None, None, "u"]))
        proba = m.predict_proba(q, target="cat")
        q.loc[2, "num"] = 1e308
        drawn = m.sample(conditions=q[["num"]], random_state=0)
    np.testing.assert_allclose(lp, far, rtol=1e-12)  # the floor, like any value past the range
    assert np.isfinite(lp).all() and filled["cat"].notna().all()
    assert np.isfinite(proba.to_numpy()).all()
    assert drawn.loc[1, "num"] == np.inf and drawn.loc[2, "num"] == 1e308
    assert drawn.loc[[1, 2], "cat"].isna().all() and drawn.loc[0, "cat"] in ("u", "v", "w")
    with pytest.raises(ValueError, match="'num' contains infinite values"):
        _small(name).fit(q)


def test_eogt_expectation_past_the_region_cap_is_estimated_from_draws():
    """``impute()`` (expectation) of rows past ``max_regions`` left them missing; they are the
    mean of 256 exact conditional draws now, with a warning saying so, close to the exact
    conditional mean that a larger cap computes."""
    from forestgen.families.intersection.region_predictions import EXPECTATION_DRAWS

    df = _table(400)
    m = fg.EOGT(n_trees=3, n_iter=15, random_state=0).fit(df)
    q = pd.DataFrame({"x": [np.nan, np.nan], "w": [0.3, np.nan], "cat": [None, "u"]})
    exact = m.impute(q)
    spread = m.sample(4000, conditions={"w": 0.3}, random_state=0)["x"].std()
    m.max_regions = 1
    with pytest.warns(RuntimeWarning, match=f"estimated from {EXPECTATION_DRAWS}"):
        est = m.impute(q, random_state=3)
    assert est.notna().all(axis=None) and est.loc[0, "w"] == 0.3
    assert abs(est.loc[0, "x"] - exact.loc[0, "x"]) < 4 * spread / np.sqrt(EXPECTATION_DRAWS)


def test_eogt_max_density_past_the_region_cap_is_the_best_of_draws():
    """``impute(method="max_density")`` of rows past ``max_regions`` stayed NaN; it is the
    completion of highest density among 256 exact conditional draws now (a warning says so),
    above nearly every other draw's."""
    from forestgen.families.intersection.region_predictions import EXPECTATION_DRAWS

    df = _table(400)
    m = fg.EOGT(n_trees=3, n_iter=15, random_state=0).fit(df)
    q = pd.DataFrame({"x": [np.nan], "w": [0.3], "cat": [None]})
    draws = m.sample(EXPECTATION_DRAWS, conditions={"w": 0.3}, random_state=5)
    m.max_regions = 1
    with pytest.warns(RuntimeWarning, match=f"most probable of {EXPECTATION_DRAWS}"):
        filled = m.impute(q, method="max_density", random_state=3)
    assert filled.notna().all(axis=None) and filled.loc[0, "w"] == 0.3
    assert m.log_prob(filled)[0] >= np.quantile(m.log_prob(draws), 0.95)


@pytest.mark.parametrize("name", ["ARF", "Chain", "NRGBoost", "GFBoost"])
def test_expect_of_numeric_columns_is_a_float_series(name):
    """``expect(["x", "w"])`` was an object Series even when every answer is a number; it is
    float64 then, and object only where a level sits beside a mean."""
    m = _small(name).fit(_table())
    assert m.expect(["x", "w"]).dtype == np.float64
    assert m.expect(["x", "w"], conditions={"cat": "u"}).dtype == np.float64
    assert m.expect().dtype == object
