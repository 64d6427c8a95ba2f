"""NRGBoost's grid (:mod:`forestgen.families.energy.grid`): binning rules and draws back to values
(spec nrgboost_def.md §1.1-1.2)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from forestgen.data.encoder import TableEncoder
from forestgen.families.energy.grid import Grid
from forestgen.families.energy.nrgboost import NRGBoost


def _grid(values, **kw):
    df = pd.DataFrame({"x": np.asarray(values, float)})
    enc = TableEncoder().fit(df)
    Z = enc.transform(df)
    return Grid.fit(Z, enc.schema, **kw), Z


def _draws(grid, code, n=6000, seed=0):
    C = np.full((n, 1), code, np.int32)
    return grid.decode(C, np.random.default_rng(seed))[:, 0]


def test_bin_draws_spread_values_seen_once_and_keep_recurring_ones():
    # distinct values 1.0 (x3), 2.0 (x2), 3.5 (x1), 5.0 (x1) on a 0.1 grid: bins at the
    # midpoints 1.5, 2.75, 4.25
    g, Z = _grid([1.0, 1.0, 1.0, 2.0, 2.0, 3.5, 5.0])
    assert list(g.edges[0]) == [1.0, 1.5, 2.75, 4.25, 5.0]
    assert np.all(_draws(g, 0) == 1.0) and np.all(_draws(g, 1) == 2.0)
    d = np.round(_draws(g, 2), 6)  # (2.75, 4.25] holds the 15 grid points 2.8 .. 4.2
    grid_pts = np.round(np.arange(28, 43) / 10, 6)
    assert set(d) == set(grid_pts)
    counts = np.array([(d == p).sum() for p in grid_pts])
    assert np.all(np.abs(counts / len(d) - 1 / 15) < 0.02)  # uniform over them
    last = np.round(_draws(g, 3), 6)  # (4.25, 5.0]: 4.3 .. 5.0, never above the range
    assert set(last) == set(np.round(np.arange(43, 51) / 10, 6))
    # "observed": a bin holding one training value always decodes to it
    go, _ = _grid([1.0, 1.0, 1.0, 2.0, 2.0, 3.5, 5.0], decode="observed")
    assert np.all(_draws(go, 2) == 3.5)


def test_bin_draws_of_thinned_bins_cover_the_gaps_between_training_values():
    vals = np.r_[np.arange(0, 118, 2.0), 119.0]  # 60 integers seen once, 8 quantile bins
    g, _ = _grid(vals, max_bins=8)
    assert g.n_values[0] == 8
    d = np.concatenate([_draws(g, k, 2000, k) for k in range(8)])
    assert d.min() >= 0 and d.max() <= 119 and np.all(d == np.round(d))
    assert np.mean(d % 2 == 1) > 0.4  # odd values, unseen in training, are drawn too
    go, _ = _grid(vals, max_bins=8, decode="observed")
    do = np.concatenate([_draws(go, k, 2000, k) for k in range(8)])
    assert do.min() >= 0 and do.max() <= 119
    # values all even are on a step of 2: the gaps are filled with even values only
    ge, _ = _grid(np.arange(0, 120, 2.0), max_bins=8)
    de = np.concatenate([_draws(ge, k, 2000, k) for k in range(8)])
    assert np.all(de % 2 == 0) and len(np.unique(de)) > 40


def test_grid_bins_give_one_bin_per_grid_point_with_exact_draws():
    vals = [0.0, 0.0, 0.5, 0.5, 2.0, 2.0, 3.0, 3.0]  # one decimal: the grid 0.0, 0.1, .., 3.0
    g, Z = _grid(vals, grid_bins=True)
    assert g.n_values[0] == 31
    for k in (0, 5, 10, 17, 30):  # observed and unobserved grid points alike
        assert np.allclose(_draws(g, k, 50), k / 10)
    C, outside = g.codes(Z)
    assert list(C[:, 0]) == [0, 0, 5, 5, 20, 20, 30, 30] and not outside.any()
    g2, _ = _grid(vals)  # default: one bin per training value
    assert g2.n_values[0] == 4
    assert _grid(vals, grid_bins=True, max_bins=30)[0].n_values[0] == 4  # 31 points > 30


def test_nrgboost_samples_new_grid_values_inside_the_range_and_keeps_recurring_ones():
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"a": np.round(rng.normal(size=200), 3),  # 200 values seen once
                       "b": rng.choice([1.5, 2.5, 4.0], 200)})  # recurring values
    m = NRGBoost(n_trees=3, pool_size=2000, random_state=0).fit(df)
    S = m.sample(600, random_state=0)
    a = S["a"].to_numpy()
    assert a.min() >= df.a.min() and a.max() <= df.a.max()
    assert np.allclose(a, np.round(a, 3))
    assert np.mean(~np.isin(a, df.a)) > 0.5
    assert set(S["b"]) <= {1.5, 2.5, 4.0}
    # "observed": one bin per training value (<= 255), each decoding to it
    seen = NRGBoost(n_trees=3, pool_size=2000, random_state=0, decode="observed").fit(df)
    assert np.isin(seen.sample(600, random_state=0)["a"], df.a).all()
