"""Monthly, quarterly and yearly dates keep their calendar: a month scale
(:mod:`forestgen.data.calendar`) instead of a step of days, which put draws of vega cars'
``Year`` (the first of January of 13 years) on every day of the year."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

import forestgen as fg
from forestgen.data.calendar import (
    MONTH,
    find_month_anchor,
    from_month_scale,
    month_step,
    to_month_scale,
)
from forestgen.data.dtypes import time_seconds
from forestgen.data.schema import Schema


def _seconds(dates) -> np.ndarray:
    return time_seconds(pd.Series(dates))


@pytest.mark.parametrize("dates, anchor, months", [
    (pd.date_range("1970-01-01", periods=13, freq="YS"), 0.0, 12),
    (pd.date_range("1999-11-30 06:00", periods=30, freq="ME"), -18 * 3600.0, 1),
    (pd.date_range("1965-03-01", periods=30, freq="MS") + pd.Timedelta("14D 6h"),
     14 * 86400.0 + 6 * 3600.0, 1),
    (pd.date_range("1960-03-31", periods=40, freq="QE"), -86400.0, 3),
])
def test_a_calendar_grid_is_found_and_its_scale_inverts_exactly(dates, anchor, months):
    s = _seconds(dates)
    assert find_month_anchor(s) == anchor
    v = to_month_scale(s, anchor)
    assert np.all(v % MONTH == 0)  # every anchor a whole month
    assert month_step(v)[0] == months * MONTH
    np.testing.assert_array_equal(from_month_scale(v, anchor), s)
    # between anchors: strictly increasing and inverted to well below a second
    x = np.sort(np.random.default_rng(0).uniform(s.min(), s.max(), 500))
    y = to_month_scale(x, anchor)
    assert np.all(np.diff(y) > 0)
    np.testing.assert_allclose(from_month_scale(y, anchor), x, rtol=0, atol=1e-3)


def test_no_calendar_grid_without_one_or_by_chance():
    days = _seconds(pd.date_range("2000-01-01", periods=100, freq="D"))
    assert find_month_anchor(days) is None
    assert find_month_anchor(_seconds(pd.to_datetime(["2000-01-01", "2000-02-01",
                                                      "2000-03-01"]))) is None  # 3 months
    assert find_month_anchor(_seconds(pd.date_range("2000-01-29", periods=12,
                                                    freq="MS") + pd.Timedelta("28D"))) is None


@pytest.fixture(scope="module")
def calendar_table():
    rng = np.random.default_rng(3)
    n = 400
    month_end = pd.Timestamp("2015-01-31") + pd.offsets.MonthEnd(0) * 0
    ends = pd.DatetimeIndex([month_end + pd.offsets.MonthEnd(int(k))
                             for k in rng.integers(0, 60, n)])
    quarter = pd.DatetimeIndex([pd.Timestamp("2001-04-01") + pd.DateOffset(months=3 * int(k))
                                for k in rng.integers(0, 30, n)])
    year = pd.DatetimeIndex([pd.Timestamp(f"{1970 + int(k)}-01-01")
                             for k in rng.integers(0, 13, n)])
    return pd.DataFrame({"closing": ends, "quarter": quarter, "year": year,
                         "amount": rng.gamma(2.0, 50.0, n) + quarter.year.to_numpy() - 2000})


def _on_calendar(df: pd.DataFrame) -> None:
    assert df["closing"].dt.is_month_end.all() and (df["closing"].dt.normalize()
                                                     == df["closing"]).all()
    q = df["quarter"]
    assert (q.dt.is_month_start & q.dt.month.isin([1, 4, 7, 10])
            & (q.dt.normalize() == q)).all()
    y = df["year"]
    assert ((y.dt.month == 1) & (y.dt.day == 1) & (y.dt.normalize() == y)).all()


@pytest.mark.parametrize("learner", ["ARF", "Chain", "Anchored", "NRGBoost", "GFBoost",
                                     "RFDE"])
def test_monthly_quarterly_and_yearly_dates_keep_their_calendar(learner, calendar_table):
    df = calendar_table
    kw = {"n_trees": 20} if learner in ("NRGBoost", "GFBoost") else {}
    model = getattr(fg, learner)(random_state=0, **kw).fit(df)
    schema = model.encoder_.schema
    assert [schema[c].step / MONTH for c in ("closing", "quarter", "year")] == [1, 3, 12]
    assert schema["closing"].month_anchor == -86400.0 and schema["year"].month_anchor == 0.0
    s = model.sample(500, random_state=1)
    _on_calendar(s)
    assert s["year"].min() >= df["year"].min() and s["year"].max() <= df["year"].max()
    assert s["year"].nunique() > 5
    lo, hi = pd.Timestamp("2004-02-15"), pd.Timestamp("2008-12-31")
    c = model.sample(200, conditions={"quarter": (lo, hi)}, random_state=2)
    _on_calendar(c)
    assert c["quarter"].between(lo, hi).all()
    assert np.isfinite(model.log_prob(df.head(30))).all()
    for c in ("closing", "quarter", "year"):
        assert type(schema[c]).from_dict(schema[c].to_dict()) == schema[c]


@pytest.mark.parametrize("learner", ["ARF", "Chain", "GFBoost"])
def test_the_mean_of_a_date_is_a_time_that_matches_the_draws(learner, calendar_table):
    """``expect`` of a datetime column is a time in every learner, as ``predict``'s are (ARF
    and Chain gave seconds since 1970, NRGBoost a datetime)."""
    kw = {"n_trees": 20} if learner == "GFBoost" else {}
    model = getattr(fg, learner)(random_state=0, **kw).fit(calendar_table)
    mean = model.expect(["year", "amount"])
    assert isinstance(mean["year"], (pd.Timestamp, np.datetime64))
    assert isinstance(mean["amount"], float)
    draws = model.sample(20000, random_state=4)["year"]
    secs = draws.astype("datetime64[ns]").astype("int64").to_numpy() / 1e9
    got = pd.Timestamp(mean["year"]).value / 1e9
    assert abs(got - secs.mean()) < 4 * secs.std() / np.sqrt(len(secs)) + 2 * 86400.0
    per_row = model.expect("year", conditions=pd.DataFrame({"amount": [50.0, 150.0]}))
    assert str(per_row.dtype).startswith("datetime64")


def test_an_inequality_between_month_scale_dates_is_kept():
    rng = np.random.default_rng(7)
    n = 300
    start = [pd.Timestamp("2010-01-01") + pd.DateOffset(months=int(k))
             for k in rng.integers(0, 48, n)]
    end = [s + pd.DateOffset(months=int(k)) for s, k in zip(start, rng.integers(0, 12, n))]
    df = pd.DataFrame({"start": start, "end": end, "x": rng.normal(size=n)})
    model = fg.ARF(random_state=0).fit(df)
    rules = model.encoder_.schema.rules or {}
    assert {"kind": "inequality", "low": 0, "high": 1}.items() <= rules["constraints"][0].items()
    s = model.sample(1000, random_state=0)
    assert (s["start"] <= s["end"]).all()
    assert (s["start"].dt.is_month_start & s["end"].dt.is_month_start).all()


def test_a_declared_constraint_keeps_its_dates_in_seconds():
    rng = np.random.default_rng(8)
    n = 300
    start = [pd.Timestamp("2010-01-01") + pd.DateOffset(months=int(k))
             for k in rng.integers(0, 48, n)]
    due = [s + pd.Timedelta(days=int(k)) for s, k in zip(start, rng.integers(0, 90, n))]
    df = pd.DataFrame({"start": start, "due": due})
    cons = [{"constraint_class": "Inequality",
             "constraint_parameters": {"low_column_name": "start", "high_column_name": "due"}}]
    model = fg.ARF(random_state=0).fit(df, kinds={"constraints": cons})
    assert model.encoder_.schema["start"].month_anchor is None
    s = model.sample(1000, random_state=0)
    assert (s["start"] <= s["due"]).all()


def test_a_declared_order_of_two_monthly_dates_keeps_their_calendar():
    """Both columns on the same month scale compare there: the declared order is kept and so
    are the months (declaring it put both in seconds: 9.5% of ARF's draws on the 1st)."""
    rng = np.random.default_rng(9)
    n = 300
    start = [pd.Timestamp("2010-01-01") + pd.DateOffset(months=int(k))
             for k in rng.integers(0, 48, n)]
    end = [s + pd.DateOffset(months=int(k)) for s, k in zip(start, rng.integers(0, 12, n))]
    df = pd.DataFrame({"start": start, "end": end, "x": rng.normal(size=n)})
    cons = [{"constraint_class": "Inequality",
             "constraint_parameters": {"low_column_name": "start", "high_column_name": "end"}}]
    model = fg.ARF(random_state=0).fit(df, kinds={"constraints": cons})
    assert model.encoder_.schema["start"].month_anchor == 0.0
    s = model.sample(1000, random_state=0)
    assert (s["start"] <= s["end"]).all()
    assert (s["start"].dt.is_month_start & s["end"].dt.is_month_start).all()


def test_far_dates_of_a_seconds_unit_column_fit_and_draw():
    """``datetime64[s]`` dates past 2262 have no nanosecond count: fit raised pandas'
    ``OutOfBoundsDatetime``; they are read in the column's unit now."""
    rng = np.random.default_rng(0)
    days = pd.date_range("2500-01-01", periods=200, freq="D", unit="s")
    months = pd.date_range("1500-01-01", periods=60, freq="MS", unit="s")
    df = pd.DataFrame({"day": rng.choice(days, 300), "month": rng.choice(months, 300),
                       "x": rng.normal(size=300)}).astype({"day": "datetime64[s]",
                                                         "month": "datetime64[s]"})
    model = fg.ARF(n_trees=5, random_state=0).fit(df)
    s = model.sample(300, random_state=0)
    assert str(s["day"].dtype) == "datetime64[s]" and s["day"].between(days[0], days[-1]).all()
    assert (s["day"].dt.normalize() == s["day"]).all() and s["month"].dt.is_month_start.all()
    assert np.isfinite(model.log_prob(df.head(5))).all()


def test_a_file_with_a_bad_month_anchor_is_refused(calendar_table):
    spec = fg.ARF(n_trees=5, random_state=0).fit(calendar_table).encoder_.schema["year"]
    for bad in (40 * 86400.0, -2 * 86400.0):
        with pytest.raises(ValueError, match="month_anchor"):
            Schema([dataclasses.replace(spec, month_anchor=bad)]).check()
    with pytest.raises(ValueError, match="month_anchor"):
        Schema([dataclasses.replace(spec, step=86400.0)]).check()


def test_torch_draws_of_yearly_dates_stay_on_new_year():
    pytest.importorskip("torch")
    df = pd.DataFrame({"year": pd.DatetimeIndex([pd.Timestamp(f"{1970 + k % 13}-01-01")
                                                  for k in range(300)]),
                       "x": np.random.default_rng(0).normal(size=300)})
    model = fg.ARF(n_trees=10, random_state=0).fit(df)
    z = model.to_torch(dtype=__import__("torch").float64).sample((500,))
    years = model.encoder_.inverse_transform(z.numpy())["year"]
    assert ((years.dt.month == 1) & (years.dt.day == 1)).all()


def test_nrgboost_expect_of_a_date_is_the_mean_of_its_draws_unrounded(calendar_table):
    """NRGBoost's ``expect`` is the mean of its draws; a date's was decoded through the
    grid, which rounded it to a whole year here."""
    model = fg.NRGBoost(n_trees=20, random_state=0).fit(calendar_table)
    mean = pd.Timestamp(model.expect(["year"], n_draws=2000, random_state=5).iloc[0])
    draws = model.sample(2000, random_state=5)["year"]
    assert abs((mean - draws.mean()).total_seconds()) < 2 * 86400.0


@pytest.mark.parametrize("learner", ["ARF", "Chain", "NRGBoost"])
def test_time_zone_dates_keep_local_midnights_across_daylight_saving(learner):
    """Berlin midnights are 22:00 or 23:00 UTC: in UTC seconds they had an hour grid and
    7% of draws fell at a local midnight. Wall-clock seconds keep whole days (and months)."""
    rng = np.random.default_rng(0)
    n = 400
    days = pd.date_range("2020-01-01", periods=700, freq="D", tz="Europe/Berlin")
    months = pd.date_range("2015-01-01", periods=60, freq="MS", tz="Europe/Berlin")
    df = pd.DataFrame({"day": rng.choice(days, n), "month": rng.choice(months, n),
                       "x": rng.normal(size=n)})
    df["day"] = df["day"].dt.tz_convert("Europe/Berlin")
    df["month"] = df["month"].dt.tz_convert("Europe/Berlin")
    kw = {"n_trees": 10} if learner == "NRGBoost" else {}
    model = getattr(fg, learner)(random_state=0, **kw).fit(df)
    schema = model.encoder_.schema
    assert schema["day"].wall_clock and schema["day"].step == 86400.0
    assert schema["month"].wall_clock and schema["month"].month_anchor == 0.0
    s = model.sample(500, random_state=1)
    assert str(s["day"].dtype) == str(df["day"].dtype)
    assert (s["day"].dt.hour == 0).all() and (s["day"].dt.minute == 0).all()
    assert ((s["month"].dt.day == 1) & (s["month"].dt.hour == 0)).all()
    c = model.sample(50, conditions={"day": ("2020-03-20", "2020-04-05")}, random_state=2)
    assert c["day"].between(pd.Timestamp("2020-03-20", tz="Europe/Berlin"),
                            pd.Timestamp("2020-04-05", tz="Europe/Berlin")).all()
    rows = df.head(5)
    lp = model.log_prob(rows)
    assert np.isfinite(lp).all()
    np.testing.assert_array_equal(model.log_prob(rows.assign(day=rows["day"].dt.tz_convert(
        "UTC"))), lp)  # the same instants given in another zone
    assert type(schema["day"]).from_dict(schema["day"].to_dict()) == schema["day"]


def test_utc_and_naive_dates_need_no_wall_clock_and_a_naive_one_refuses_it():
    days = pd.date_range("2020-01-01", periods=100, freq="D")
    df = pd.DataFrame({"naive": days, "utc": days.tz_localize("UTC"),
                       "x": np.arange(100.0)})
    schema = fg.ARF(n_trees=3, random_state=0).fit(df).encoder_.schema
    assert not schema["naive"].wall_clock and not schema["utc"].wall_clock
    with pytest.raises(ValueError, match="wall_clock"):
        Schema([dataclasses.replace(schema["naive"], wall_clock=True)]).check()


def test_an_interval_between_two_months_names_the_months(calendar_table):
    model = fg.ARF(n_trees=3, random_state=0).fit(calendar_table)
    with pytest.raises(ValueError, match="'closing' holds dates every 1 month"):
        model.sample(3, conditions={"closing": ("2016-03-05", "2016-03-20")})
