"""ARF's ``grid_spikes`` (stop 54, issue 37): on a numeric column with a grid that repeats
values, each leaf's truncated normal mixed with the leaf's own repeated values, uniform on their
grid cells (:class:`~forestgen.leaves.grid_spike.GridSpikeLeaf`); ``grid_spikes=0`` is FORDE's
law, bit for bit."""

from __future__ import annotations

import warnings

import numba
import numpy as np
import pandas as pd
import pytest

import forestgen as fg
from forestgen.families.mixture.arf import SPIKE_WEIGHTS
from forestgen.leaves import GridSpikeLeaf, PointMassLeaf
from forestgen.testing import check_learner, check_statistics


@pytest.fixture(scope="module")
def diabetes():
    """sklearn's diabetes table in its recorded units: ``bp`` mostly whole numbers, ``s5`` the
    log of whole numbers to 4 decimals: values the columns repeat."""
    sk = pytest.importorskip("sklearn.datasets")
    return sk.load_diabetes(scaled=False, as_frame=True).frame


def _split(df, seed):
    idx = np.random.default_rng(seed).permutation(len(df))
    return df.iloc[idx[:300]], df.iloc[idx[300:]]


def _lp(model, rows):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return model.log_prob(rows)


def _grid_table(n=800, seed=0):
    """``w`` a wind speed on a 0.1 grid (airquality's ``Wind``): 70% of rows read in whole
    knots and written in mph, so that every fifth or sixth grid point is taken by many rows
    (none by 10% of them: no point mass), the others read to 0.1 mph; ``y`` continuous,
    ``c`` a categorical, all dependent."""
    rng = np.random.default_rng(seed)
    z = rng.standard_normal(n)
    speed = np.clip(11.0 + 4.0 * z + rng.normal(0, 2.0, n), 1.0, 30.0)
    knots = np.round(speed / 1.15078) * 1.15078
    return pd.DataFrame({"w": np.round(np.where(rng.random(n) < 0.7, knots, speed), 1),
                         "y": z + 0.5 * rng.standard_normal(n),
                         "c": np.where(z + rng.normal(0, 0.7, n) > 0, "hi", "lo")})


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_spikes_beat_forde_law_on_held_out_rows(diabetes, seed):
    """FORDE's normals smear the values ``bp`` and ``s5`` repeat; the spikes keep them."""
    train, test = _split(diabetes, seed)
    plain = fg.ARF(random_state=seed, marginal_weight=0, grid_spikes=0).fit(train)
    spiky = fg.ARF(random_state=seed, marginal_weight=0, grid_spikes="oob").fit(train)
    gain = float(np.mean(_lp(spiky, test)) - np.mean(_lp(plain, test)))
    assert gain > 0.5, gain
    assert spiky.grid_spikes_["bp"] > 0


def test_spikes_beat_forde_law_on_a_repeating_grid_column():
    df = _grid_table()
    train, test = df.iloc[:500], df.iloc[500:]
    ll = {s: float(np.mean(_lp(fg.ARF(random_state=0, marginal_weight=0,
                                      grid_spikes=s).fit(train), test)))
          for s in (0, "oob")}
    assert ll["oob"] > ll[0] + 0.3, ll


def test_zero_is_forde_law_and_the_leaves_it_builds(diabetes):
    train, test = _split(diabetes, 0)
    plain = fg.ARF(random_state=0, marginal_weight=0, grid_spikes=0).fit(train)
    assert plain.grid_spikes_ == {}
    assert not any(isinstance(lm, GridSpikeLeaf) for lm in plain.leaf_models_)
    fixed = fg.ARF(random_state=0, marginal_weight=0, grid_spikes=0.4).fit(train)
    assert fixed.grid_spikes_ and set(fixed.grid_spikes_.values()) == {0.4}
    for s, lm in zip(fixed.schema_.columns, fixed.leaf_models_):
        gs = lm.base_ if isinstance(lm, PointMassLeaf) else lm
        assert isinstance(gs, GridSpikeLeaf) == (s.name in fixed.grid_spikes_)
        if isinstance(gs, GridSpikeLeaf):
            assert np.all((gs.weight_ >= 0) & (gs.weight_ <= 0.4))
    # the same forest: only the numeric leaf laws differ
    np.testing.assert_array_equal(plain.forest_.threshold, fixed.forest_.threshold)
    np.testing.assert_array_equal(plain.leaf_log_weight_, fixed.leaf_log_weight_)
    oob = fg.ARF(random_state=0, marginal_weight=0, grid_spikes="oob").fit(train)
    assert set(oob.grid_spikes_.values()) <= set(SPIKE_WEIGHTS)
    none = fg.ARF(random_state=1, marginal_weight=0, grid_spikes="oob", sampling="none",
                  n_trees=3, max_iters=0).fit(train)
    assert set(none.grid_spikes_.values()) == {0.0}  # no out-of-bag rows: FORDE's law


def test_bad_grid_spikes_names_the_parameter():
    df = pd.DataFrame({"x": np.arange(20.0)})
    for bad in (-0.1, 1.5, "auto", float("nan")):
        with pytest.raises(ValueError, match="grid_spikes"):
            fg.ARF(grid_spikes=bad).fit(df)


def test_density_integrates_to_one():
    df = _grid_table(400)
    m = fg.ARF(n_trees=4, random_state=0, marginal_weight=0, grid_spikes=0.6).fit(df)
    assert isinstance(m.leaf_models_[0], GridSpikeLeaf)
    # cells of 0.02 in w (five per grid cell of 0.1, whose faces fall on cell faces)
    w = np.arange(df.w.min() - 0.04, df.w.max() + 0.05, 0.02)
    y = np.linspace(df.y.min() - 4, df.y.max() + 4, 300)
    gw, gy = np.meshgrid(w, y, indexing="ij")
    cell = 0.02 * (y[1] - y[0])
    total = sum(np.exp(_lp(m, pd.DataFrame({"w": gw.ravel(), "y": gy.ravel(), "c": lev})))
                .sum() * cell for lev in ("hi", "lo"))
    assert total == pytest.approx(1.0, abs=0.01)


def test_draws_follow_the_density_on_the_grid_column():
    df = _grid_table()
    m = fg.ARF(n_trees=10, random_state=3, marginal_weight=0, grid_spikes=0.7).fit(df)
    results = check_statistics(m, df, n=4000, random_state=0, raise_on_failure=False)
    failed = [r for r in results if not r.passed]
    assert not failed, failed
    # the draws land on the grid, and on the values the column repeats as often as the
    # density's mass on their grid cells says
    s = m.sample(20000, random_state=1)
    np.testing.assert_array_equal(s.w, np.round(s.w, 1))
    vals = np.sort(df.w.unique())
    lm, pi = m.leaf_models_[0], np.exp(m.leaf_log_weight_)
    assert isinstance(lm, GridSpikeLeaf) and pi.sum() == pytest.approx(1.0)
    leaf = np.arange(len(pi))
    prob = np.array([pi @ np.exp(lm.log_prob_interval(leaf, np.full(len(pi), v - 0.05),
                                                      np.full(len(pi), v + 0.05)))
                     for v in vals])
    freq = np.array([np.mean(np.isclose(s.w, v)) for v in vals])
    se = np.sqrt(prob * (1 - prob) / len(s))
    assert np.all(np.abs(freq - prob) <= 4.5 * se + 1e-3), np.c_[vals, freq, prob]


def test_every_query_agrees(diabetes):
    check_learner(fg.ARF(n_trees=5, random_state=0, n_jobs=1, grid_spikes=0.5))


def test_torch_log_prob_and_draws_equal_numpy(diabetes):
    torch = pytest.importorskip("torch")
    train, _ = _split(diabetes, 0)
    m = fg.ARF(random_state=0, marginal_weight=0, grid_spikes=0.5).fit(train)
    dist = m.to_torch(dtype=torch.float64)
    got = dist.log_prob(dist.encode(train)).numpy()
    np.testing.assert_allclose(got, m.log_prob(train, floor=None), rtol=1e-9, atol=1e-9)


def test_same_bits_at_one_and_two_threads(diabetes):
    train, test = _split(diabetes, 2)
    before = numba.get_num_threads()
    out = []
    try:
        for threads in (1, 2):
            numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
            m = fg.ARF(random_state=4, n_jobs=threads, grid_spikes="oob").fit(train)
            out.append((_lp(m, test), m.sample_encoded(500, random_state=1),
                        m.grid_spikes_, m.marginal_weight_))
    finally:
        numba.set_num_threads(before)
    (la, sa, pa, wa), (lb, sb, pb, wb) = out
    np.testing.assert_array_equal(la, lb)
    np.testing.assert_array_equal(sa, sb)
    assert pa == pb and wa == wb
