"""Input a data scientist passes (issue 11): subsets of columns, one-row Series / dicts,
unknown columns, polars frames, text booleans and integers, datetimes, ordered categoricals."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

import forestgen as fg
from forestgen.data import TableEncoder


@pytest.fixture(scope="module")
def arf(natural):
    return fg.ARF(n_trees=20, random_state=0).fit(natural)


def test_log_prob_on_a_subset_of_columns_is_the_marginal(arf, natural):
    rows = natural.dropna().head(8)
    sub = arf.log_prob(rows[["carat", "cut"]])
    blanked = rows.assign(price=np.nan, rating=np.nan, affairs=np.nan, weight=np.nan)
    np.testing.assert_allclose(sub, arf.log_prob(blanked), rtol=1e-12)
    assert (sub > arf.log_prob(rows)).all()  # a marginal of fewer columns has more mass


def test_one_row_as_series_or_dict(arf, natural):
    row = natural.dropna().iloc[3]
    want = arf.log_prob(natural.dropna().iloc[[3]])
    np.testing.assert_allclose(arf.log_prob(row), want, rtol=1e-12)
    np.testing.assert_allclose(arf.log_prob(row.to_dict()), want, rtol=1e-12)


def test_unknown_column_is_an_error_naming_it(arf, natural):
    with pytest.raises(ValueError, match="'colour'.*not fitted on"):
        arf.log_prob(natural.head(3).assign(colour="red"))


def test_polars_frame():
    pl = pytest.importorskip("polars")
    cols = {"x": list(np.arange(60.0) % 7 + 0.5), "c": list("abc") * 20}
    df = pd.DataFrame(cols)
    model = fg.ARF(n_trees=5, random_state=0).fit(pl.DataFrame(cols))
    assert model.encoder_.schema["c"].kind == "categorical"
    np.testing.assert_allclose(model.log_prob(pl.DataFrame(cols).head(5)),
                               model.log_prob(df.head(5)))


def test_text_booleans_and_integers_are_values_not_unseen_levels():
    df = pd.DataFrame({"flag": [True, False] * 30, "n": np.arange(60) % 5})
    enc = TableEncoder().fit(df)
    text = pd.DataFrame({"flag": ["True", "false", "1"], "n": ["3", "0", "4"]})
    np.testing.assert_array_equal(enc.transform(text),
                                  enc.transform(pd.DataFrame({"flag": [True, False, True],
                                                              "n": [3, 0, 4]})))


def test_datetime_and_timedelta_columns_round_trip_with_time_zone():
    rng = np.random.default_rng(0)
    when = pd.Series(pd.to_datetime("2024-03-01", utc=True)
                     + pd.to_timedelta(rng.uniform(0, 30 * 86400, 200).round(), unit="s"))
    df = pd.DataFrame({"when": when.dt.tz_convert("Europe/Berlin"),
                       "took": pd.to_timedelta(rng.gamma(2, 300, 200).round(), unit="s"),
                       "x": rng.normal(size=200)})
    df.loc[5, "when"] = pd.NaT
    enc = TableEncoder().fit(df)
    back = enc.inverse_transform(enc.transform(df))
    assert back.dtypes.tolist() == df.dtypes.tolist()
    pd.testing.assert_series_equal(back["when"], df["when"])
    pd.testing.assert_series_equal(back["took"], df["took"])
    model = fg.ARF(n_trees=10, random_state=0).fit(df)
    s = model.sample(300, random_state=1, missing=False)
    assert str(s["when"].dt.tz) == "Europe/Berlin"
    assert s["when"].min() >= df["when"].min() and s["took"].max() <= df["took"].max()


@pytest.fixture(scope="module")
def dated():
    """Whole dates (one per row, a few per day, like a field log) and hourly readings."""
    rng = np.random.default_rng(3)
    day = pd.to_datetime("2007-11-09") + pd.to_timedelta(rng.integers(0, 700, 240), unit="D")
    hour = pd.to_datetime("2020-01-01", utc=True) + pd.to_timedelta(rng.integers(0, 500, 240),
                                                                     unit="h")
    return pd.DataFrame({"day": day, "hour": hour.tz_convert("Europe/Berlin"),
                         "x": rng.normal(size=240).round(2)})


@pytest.mark.parametrize("learner", ["ARF", "DEF", "RFDE", "GFBoost"])
def test_dates_stay_dates_and_take_time_conditions(dated, learner):
    """A column of whole dates is sampled as whole dates (hours stay whole hours), and interval
    conditions on it take Timestamps or ISO strings, honoured after decoding (issue 11)."""
    model = getattr(fg, learner)(random_state=0).fit(dated)
    assert model.encoder_.schema["day"].step == 86400.0
    assert model.encoder_.schema["hour"].step == 3600.0
    s = model.sample(300, random_state=1)
    assert (s["day"].dt.normalize() == s["day"]).all()
    assert (s["hour"].dt.floor("h") == s["hour"]).all() and str(s["hour"].dt.tz) == "Europe/Berlin"
    lo, hi = pd.Timestamp("2008-03-01"), pd.Timestamp("2008-03-15")
    c = model.sample(200, conditions={"day": (lo, hi)}, random_state=2)["day"]
    assert c.between(lo, hi).all() and (c.dt.normalize() == c).all()
    c = model.sample(50, conditions={"day": ("2008-03-01", None)}, random_state=2)["day"]
    assert (c >= lo).all()
    lp = model.log_prob(dated.head(5), conditions={"day": dated["day"].iloc[0]})
    assert np.isfinite(lp).all()


@pytest.mark.parametrize("learner", ["ARF", "Chain", "Anchored"])
def test_times_on_a_coarser_grid_keep_it(learner):
    """Quarter hours (datetimes, times of day) and 8-hour shifts keep their grid as numbers
    keep theirs (a step of 60 s put 77% of ARF's draws off the quarter hours); a few values
    on a coarser multiple by chance do not make one."""
    rng = np.random.default_rng(4)
    n = 300
    q = rng.integers(32, 72, n) * 15  # minutes, 08:00-17:45
    df = pd.DataFrame({
        "appt": pd.to_datetime("2024-03-01") + pd.to_timedelta(rng.integers(0, 30, n) * 1440
                                                              + q, unit="min"),
        "slot": pd.to_timedelta(q, unit="min"),
        "shift": pd.to_datetime("2024-01-01") + pd.to_timedelta(rng.integers(0, 90, n) * 8,
                                                               unit="h"),
        "x": rng.normal(size=n)})
    model = getattr(fg, learner)(random_state=0).fit(df)
    schema = model.encoder_.schema
    assert (schema["appt"].step, schema["slot"].step, schema["shift"].step) == \
        (900.0, 900.0, 28800.0)
    s = model.sample(400, random_state=1)
    assert (s["appt"].dt.floor("15min") == s["appt"]).all()
    assert (s["slot"].dt.total_seconds() % 900 == 0).all()
    assert (s["shift"].dt.floor("8h") == s["shift"]).all()
    two = pd.DataFrame({"t": pd.to_datetime(["2024-01-01 00:30", "2024-01-01 01:30"])})
    assert fg.ARF(n_trees=2, random_state=0).fit(two).encoder_.schema["t"].step == 60.0


@pytest.mark.parametrize("learner", ["ARF", "Chain", "Anchored", "NRGBoost", "GFBoost"])
def test_weekly_dates_keep_their_weekday(learner):
    """Dates a week apart on Mondays (and Friday shifts at 06:00) are a grid of a week from
    its own origin, not whole days counted from the epoch (a Thursday): with a step of a day
    86% of Anchored's draws fell on other weekdays. Conditional draws, the torch map and the
    saved schema keep it."""
    rng = np.random.default_rng(5)
    n = 300
    week = pd.Timestamp("2021-01-04") + pd.to_timedelta(7 * rng.integers(0, 60, n), unit="D")
    shift = pd.Timestamp("2021-01-01 06:00") + pd.to_timedelta(7 * rng.integers(0, 40, n),
                                                               unit="D")
    df = pd.DataFrame({"week": week, "shift": shift,
                       "sales": rng.gamma(3.0, 100.0, n) + week.month.to_numpy()})
    kw = {"n_trees": 20} if learner in ("NRGBoost", "GFBoost") else {}
    model = getattr(fg, learner)(random_state=0, **kw).fit(df)
    spec = model.encoder_.schema["week"]
    assert (spec.step, spec.step_origin) == (7 * 86400.0, 4 * 86400.0)  # Monday - Thursday
    assert model.encoder_.schema["shift"].step_origin == 86400.0 + 6 * 3600.0
    s = model.sample(400, random_state=1)
    assert (s["week"].dt.day_of_week == 0).all() and (s["week"].dt.normalize() == s["week"]).all()
    assert ((s["shift"].dt.day_of_week == 4) & (s["shift"].dt.hour == 6)).all()
    lo, hi = pd.Timestamp("2021-03-01"), pd.Timestamp("2021-06-30")
    c = model.sample(200, conditions={"week": (lo, hi)}, random_state=2)["week"]
    assert c.between(lo, hi).all() and (c.dt.day_of_week == 0).all()
    assert np.isfinite(model.log_prob(s.head(20))).all()
    assert type(spec).from_dict(spec.to_dict()) == spec


def test_the_torch_support_map_keeps_a_grid_origin_bit_for_bit():
    torch = pytest.importorskip("torch")
    from forestgen.data.schema import ColumnSpec, Schema
    from forestgen.data.support import to_support, torch_to_support

    spec = ColumnSpec("w", "continuous", "datetime64[ns]", lower=4 * 86400.0,
                      upper=4 * 86400.0 + 7 * 86400.0 * 60, step=7 * 86400.0,
                      step_origin=4 * 86400.0)
    x = np.random.default_rng(0).uniform(spec.lower - 1e5, spec.upper + 1e5, 1000)
    np.testing.assert_array_equal(torch_to_support(torch.tensor(x), spec).numpy(),
                                  to_support(x, spec))
    assert np.all((to_support(x, spec) - spec.step_origin) % spec.step == 0)
    with pytest.raises(ValueError, match="step_origin"):
        Schema([dataclasses.replace(spec, step_origin=spec.step)]).check()


def test_a_bad_time_condition_names_the_column(dated):
    model = fg.ARF(n_trees=5, random_state=0).fit(dated)
    with pytest.raises(ValueError, match="'day' holds times.*'soon' is not a time"):
        model.sample(5, conditions={"day": ("soon", None)})
    assert model.encoder_.schema["x"].step is None  # numbers keep their decimals grid
    spec = model.encoder_.schema["day"]
    assert type(spec).from_dict(spec.to_dict()) == spec  # saved with the model


def test_ordered_categoricals_are_ordinal(natural):
    model = fg.ARF(n_trees=20, random_state=0).fit(natural)
    spec = model.encoder_.schema["cut"]
    assert spec.ordinal and not spec.is_nominal
    s = model.sample(400, conditions={"cut": ("Very Good", "Premium")}, random_state=0)
    assert set(s["cut"].astype(str)) == {"Very Good", "Premium"}
    assert s["cut"].dtype == natural["cut"].dtype
