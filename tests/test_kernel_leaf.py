"""KernelLeaf: the leave-one-out bandwidth follows the data's shape, a grid's ties do not
collapse it, draws near the leaf's own values, and it serves other learners (ARF)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import forestgen as fg
from forestgen.leaves import ColumnCell, KernelLeaf


def _fit(x, **kw):
    x = np.asarray(x, float)
    cell = ColumnCell(lower=np.array([x.min() - 1.0]), upper=np.array([x.max() + 1.0]),
                      allowed=None, data_min=float(x.min()), data_max=float(x.max()))
    return KernelLeaf(**kw).fit(x, np.zeros(len(x), np.int64), cell), cell


def test_loo_bandwidth_is_wide_for_a_normal_and_narrow_for_tight_clusters():
    rng = np.random.default_rng(0)
    smooth, _ = _fit(rng.normal(size=400))
    clusters, _ = _fit(rng.choice([-3.0, 0.0, 3.0], 400) + 0.02 * rng.normal(size=400))
    # Silverman's rule for a normal is c = 1.06; three clusters of SD 0.02 in a spread of
    # SD 2.5 need a bandwidth far below the spread's
    assert 0.65 <= smooth.factor_ <= 1.75
    assert clusters.factor_ <= 0.05
    # the narrow choice is the better density of fresh rows from the same clusters
    fresh = rng.choice([-3.0, 0.0, 3.0], 400) + 0.02 * rng.normal(size=400)
    wide, _ = _fit(clusters.center_, bandwidth=1.0)
    z = np.zeros(len(fresh), np.int64)
    assert clusters.log_prob(z, fresh).mean() > wide.log_prob(z, fresh).mean() + 1.0


def test_ties_on_a_grid_do_not_collapse_the_bandwidth():
    rng = np.random.default_rng(1)
    x = np.round(rng.normal(size=300), 1)  # about 60 values, every one repeated
    lm, _ = _fit(x)
    assert lm.factor_ > min(fg.leaves.kernel.FACTORS)
    assert np.all(np.diff(np.unique(lm.center_)) > 0)  # ties merged into weighted kernels
    assert abs(lm.weight_.sum() - 1.0) < 1e-12 and len(lm.center_) == len(np.unique(x))


def test_a_narrow_bandwidth_draws_near_the_leaf_values():
    x = np.array([1.0, 1.0, 2.0, 5.0, 5.0, 5.0])
    lm, _ = _fit(x, bandwidth=0.05)
    d = lm.sample(np.zeros(3000, np.int64), np.random.default_rng(0))
    near = np.abs(d[:, None] - np.array([1.0, 2.0, 5.0])[None, :]).min(1)
    assert np.quantile(near, 0.99) < 0.2
    shares = [np.mean(np.abs(d - v) < 0.2) for v in (1.0, 2.0, 5.0)]
    np.testing.assert_allclose(shares, [2 / 6, 1 / 6, 3 / 6], atol=0.03)
    # conditional draws inside an interval take the kernels by their mass there
    c = lm.sample(np.zeros(2000, np.int64), np.random.default_rng(1), lo=np.full(2000, 1.5),
                  hi=np.full(2000, 6.0))
    assert (c > 1.5).all() and (c <= 6.0).all()
    assert abs(np.mean(np.abs(c - 2.0) < 0.2) - 0.25) < 0.03  # 1 of the 4 rows in (1.5, 6]


def test_bad_bandwidth_is_refused():
    with pytest.raises(ValueError, match="KernelLeaf: bandwidth"):
        _fit([0.0, 1.0], bandwidth=-1.0)
    with pytest.raises(ValueError, match="KernelLeaf: bandwidth"):
        _fit([0.0, 1.0], bandwidth="silverman")


def test_arf_with_kernel_leaves_is_a_normalised_density():
    rng = np.random.default_rng(2)
    df = pd.DataFrame({"x": rng.normal(size=200)})
    df["y"] = df.x + 0.3 * rng.normal(size=200)
    m = fg.ARF(n_trees=5, numeric_leaf="kernel", random_state=0, n_jobs=1).fit(df)
    g = np.linspace(df.x.min() - 0.1, df.x.max() + 0.1, 4001)
    dens = np.exp(m.log_prob(pd.DataFrame({"x": g, "y": np.nan}), floor=None))
    assert abs(np.trapezoid(dens, g) - 1.0) < 5e-3
    s = m.sample(2000, random_state=0)
    assert s.x.between(df.x.min(), df.x.max()).all()
    assert abs(np.corrcoef(s.x, s.y)[0, 1] - np.corrcoef(df.x, df.y)[0, 1]) < 0.1
