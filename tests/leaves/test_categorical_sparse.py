"""The sparse categorical leaf answers exactly as the dense ``[leaves, levels]`` pmf table it
replaces (the formula of ARF spec §2.3 written out densely here), in a fraction of the memory."""

from __future__ import annotations

import numpy as np
import pytest

from forestgen.leaves.base import ColumnCell
from forestgen.leaves.categorical import CategoricalLeaf
from forestgen.leaves.uniform_levels import UniformLevelsLeaf


def _dense_pmf(x, leaf, allowed, alpha, weight=None):
    """The dense table: (c_v + alpha) / (N + alpha k_allowed) on allowed levels, uniform over
    the allowed levels (all if none) for a leaf without rows and smoothing."""
    L, k = allowed.shape
    ok = ~np.isnan(x)
    w = np.ones(ok.sum()) if weight is None else weight[ok]
    c = np.zeros((L, k))
    np.add.at(c, (leaf[ok], x[ok].astype(int)), w)
    c *= allowed
    p = c + alpha * allowed
    tot = p.sum(1, keepdims=True)
    na = allowed.sum(1, keepdims=True)
    uni = np.where(na > 0, allowed / np.maximum(na, 1), 1.0 / k)
    return np.where(tot > 0, p / np.where(tot > 0, tot, 1), uni), c.sum(1)


def _dense_sample(pmf, leaf, u, levels=None):
    p = pmf[leaf] if levels is None else pmf[leaf] * levels
    cdf = np.cumsum(p, axis=1)
    return np.minimum((cdf < u[:, None] * cdf[:, -1:]).sum(1), pmf.shape[1] - 1)


@pytest.fixture(params=[(0.0, False), (0.5, False), (0.0, True)], ids=["plain", "alpha",
                                                                       "weighted"])
def case(request):
    alpha, weighted = request.param
    rng = np.random.default_rng(0)
    L, k, p = 40, 7, 300
    allowed = rng.random((L, k)) < 0.7
    allowed[3] = False  # a leaf that allows no level
    leaf = rng.integers(0, L - 5, p)  # the last 5 leaves get no rows
    x = rng.integers(0, k, p).astype(float)
    x[rng.random(p) < 0.1] = np.nan
    w = rng.integers(0, 3, p).astype(float) if weighted else None
    cell = ColumnCell(np.zeros(L), np.ones(L), allowed, 0.0, k - 1.0, n_levels=k)
    lm = CategoricalLeaf(alpha=alpha, floor=1e-20).fit(x, leaf, cell, w)
    pmf, count = _dense_pmf(x, leaf, allowed, alpha, w)
    return lm, pmf, count


def test_probabilities_equal_the_dense_table(case):
    lm, pmf, count = case
    L, k = pmf.shape
    np.testing.assert_allclose(lm.probs(np.arange(L)), pmf, rtol=1e-14, atol=0)
    np.testing.assert_allclose(lm.count_, count)
    np.testing.assert_allclose(lm.probs(np.arange(L)).sum(1), 1.0, rtol=1e-12)
    np.testing.assert_array_equal(lm.support_size(), (pmf > 0).sum(1))
    leaf = np.repeat(np.arange(L), k + 2)
    x = np.tile(np.r_[np.arange(k), -1, np.nan], L).astype(float)
    # an allowed level of no mass: the floor; a level outside the leaf's cell (the cell that
    # allows none allows every level) and code -1, no level: -inf
    cell_ok = np.unpackbits(lm.allowed_, axis=1, count=k, bitorder="little").astype(bool)
    assert cell_ok[3].all() and not cell_ok.all()
    code = np.clip(np.nan_to_num(x), 0, k - 1).astype(int)
    with np.errstate(divide="ignore"):
        ref = np.where(np.isnan(x), 0.0, np.where((x < 0) | ~cell_ok[leaf, code], -np.inf,
                                                  np.log(np.maximum(pmf[leaf, code], 1e-20))))
    np.testing.assert_allclose(lm.log_prob(leaf, x), ref, rtol=1e-13)
    np.testing.assert_allclose(lm.mean(np.arange(L)), pmf @ np.arange(k), rtol=1e-12)
    rng = np.random.default_rng(1)
    lv = rng.random((L, k)) < 0.5
    with np.errstate(divide="ignore"):
        np.testing.assert_allclose(lm.log_prob_levels(np.arange(L), lv),
                                   np.log((pmf * lv).sum(1)), rtol=1e-13)
        np.testing.assert_allclose(lm.log_prob_levels(np.arange(L), lv[0]),
                                   np.log((pmf * lv[0]).sum(1)), rtol=1e-13)


def test_draws_equal_the_dense_inverse_cdf(case):
    lm, pmf, _ = case
    L, k = pmf.shape
    leaf = np.random.default_rng(2).integers(0, L, 5000)
    u = np.random.default_rng(3).random(len(leaf))
    got = lm.sample(leaf, np.random.default_rng(3))
    np.testing.assert_array_equal(got, _dense_sample(pmf, leaf, u))
    lv = np.random.default_rng(4).random((len(leaf), k)) < 0.6
    got = lm.sample(leaf, np.random.default_rng(3), levels=lv)
    np.testing.assert_array_equal(got, _dense_sample(pmf, leaf, u, lv))


def test_leaf_totals_are_the_level_sums_in_code_order(case):
    lm, pmf, _ = case
    L, k = pmf.shape
    seq = np.cumsum(lm.probs(np.arange(L)), axis=1)[:, -1]  # summed in code order
    np.testing.assert_array_equal(lm.total_, seq)
    loaded = CategoricalLeaf(alpha=lm.alpha).set_param_arrays(lm.param_arrays())
    np.testing.assert_array_equal(loaded.total_, seq)  # derived again on load, not saved
    assert "total_" not in lm.param_arrays()
    del lm.__dict__["total_"]  # (a model unpickled from before total_): derived on first draw
    leaf = np.random.default_rng(2).integers(0, L, 500)
    u = np.random.default_rng(3).random(len(leaf))
    np.testing.assert_array_equal(lm.sample_uniform(leaf, u), _dense_sample(pmf, leaf, u))


def test_legacy_dense_arrays_load_to_the_same_model(case):
    lm, pmf, count = case
    L, k = pmf.shape
    lm.check_param_arrays({"pmf_": pmf, "count_": count}, L, k)
    old = CategoricalLeaf(alpha=lm.alpha).set_param_arrays({"pmf_": pmf, "count_": count})
    np.testing.assert_array_equal(old.probs(np.arange(L)), pmf)
    new = CategoricalLeaf(alpha=lm.alpha)
    lm.check_param_arrays(lm.param_arrays(), L, k)
    new.set_param_arrays(lm.param_arrays())
    np.testing.assert_array_equal(new.probs(np.arange(L)), lm.probs(np.arange(L)))


def test_memory_follows_the_entries_not_leaves_times_levels():
    rng = np.random.default_rng(0)
    L, k, p = 2000, 400, 6000  # ~3 rows per leaf, many levels
    leaf = rng.integers(0, L, p)
    x = rng.integers(0, k, p).astype(float)
    cell = ColumnCell(np.zeros(L), np.ones(L), np.ones((L, k), bool), 0.0, k - 1.0, n_levels=k)
    for lm in (CategoricalLeaf().fit(x, leaf, cell),
               CategoricalLeaf(prior=1.0).fit(x, leaf, cell)):  # the prior stays sparse
        nbytes = sum(v.nbytes for v in lm.param_arrays().values())
        entries = len(lm.code_)
        assert entries <= p
        assert nbytes <= 12 * entries + L * (24 + k // 8 + 1) + 8 * k + 64
        assert nbytes < 0.05 * 8 * L * k  # the dense table's size


def test_uniform_levels_leaf_is_uniform_over_allowed_levels():
    rng = np.random.default_rng(0)
    L, k = 30, 5
    allowed = rng.random((L, k)) < 0.6
    allowed[0] = False
    cell = ColumnCell(np.zeros(L), np.ones(L), allowed, 0.0, k - 1.0, n_levels=k)
    lm = UniformLevelsLeaf().fit(np.zeros(3), np.zeros(3, np.int64), cell)
    n = allowed.sum(1, keepdims=True)
    np.testing.assert_allclose(lm.probs(np.arange(L)),
                               np.where(n > 0, allowed / np.maximum(n, 1), 0.0))
    with np.errstate(divide="ignore"):
        np.testing.assert_allclose(lm.log_max_density(np.arange(L)),
                                   np.where(n[:, 0] > 0, -np.log(n[:, 0]), -np.inf))


def test_marginal_prior_is_the_dirichlet_posterior_mean_over_the_allowed_levels():
    """Issue 11: p(v | leaf) = (c_v + a g_v) / (N + a sum_allowed g) with g the marginal pmf of
    the fitting pairs; an excluded level keeps 0, every leaf sums to 1."""
    x = np.array([0, 0, 1, 2, 2, 2, 3, 0, 1, 3], float)
    leaf = np.array([0, 0, 0, 1, 1, 1, 1, 2, 2, 2])
    k, L, a = 5, 4, 2.0
    allowed = np.ones((L, k), bool)
    allowed[1, 0] = False  # leaf 1's cell excludes level 0
    cell = ColumnCell(np.zeros(L), np.ones(L), allowed, 0.0, k - 1.0, n_levels=k)
    lm = CategoricalLeaf(prior=a, alpha=0.5).fit(x, leaf, cell)
    g = np.bincount(x.astype(int), minlength=k) / len(x)
    m = 0.5 + a * g
    for lf in range(L):
        c = np.bincount(x[leaf == lf].astype(int), minlength=k)
        want = np.where(allowed[lf], c + m, 0.0)
        want /= want.sum()  # leaf 3 has no rows: the prior itself
        np.testing.assert_allclose(lm.probs(np.array([lf]))[0], want, rtol=1e-12)
        for v in range(k):
            lp = lm.log_prob(np.array([lf]), np.array([float(v)]))[0]
            assert np.isclose(np.exp(lp), want[v]) or (want[v] == 0 and lp == np.log(lm.floor))
    np.testing.assert_allclose(lm.probs(np.arange(L)).sum(1), 1.0)
    # level 4 is never seen: only the uniform alpha part reaches it
    assert lm.probs(np.array([0]))[0, 4] < lm.probs(np.array([0]))[0, 3]
    # a prior-free leaf gives levels seen elsewhere nothing; with the prior they get mass
    plain = CategoricalLeaf().fit(x, leaf, cell)
    assert plain.probs(np.array([0]))[0, 3] == 0
    assert np.isclose(CategoricalLeaf(prior=1.0).fit(x, leaf, cell).probs(np.array([0]))[0, 3],
                      0.2 / (3 + 1))  # g_3 = 0.2, N = 3


def test_marginal_prior_queries_agree_with_the_dense_table():
    rng = np.random.default_rng(3)
    L, k, p = 40, 12, 300
    leaf = rng.integers(0, L, p)
    x = rng.choice(k, p, p=np.r_[0.5, np.full(k - 1, 0.5 / (k - 1))]).astype(float)
    allowed = rng.random((L, k)) < 0.7
    allowed[:, 0] = True
    x[~allowed[leaf, x.astype(int)]] = 0.0  # rows lie inside their cells
    cell = ColumnCell(np.zeros(L), np.ones(L), allowed, 0.0, k - 1.0, n_levels=k)
    lm = CategoricalLeaf(prior=1.0).fit(x, leaf, cell)
    dense = lm.probs(np.arange(L))
    np.testing.assert_allclose(dense.sum(1), 1.0)
    assert np.all(dense[~allowed] == 0)
    levels = rng.random(k) < 0.5
    np.testing.assert_allclose(np.exp(lm.log_prob_levels(np.arange(L), levels)),
                               dense[:, levels].sum(1))
    np.testing.assert_allclose(lm.mean(np.arange(L)), dense @ np.arange(k))
    draws = lm.sample(np.zeros(20000, np.int64), np.random.default_rng(0))
    freq = np.bincount(draws.astype(int), minlength=k) / len(draws)
    np.testing.assert_allclose(freq, dense[0], atol=0.015)
    assert np.all(lm.support_size() == (dense > 0).sum(1))
    # a file written before base_ existed loads with the uniform rest (the old meaning)
    old = {kk: v for kk, v in CategoricalLeaf(alpha=0.3).fit(x, leaf, cell).param_arrays().items()
           if kk != "base_"}
    CategoricalLeaf().check_param_arrays(old, L, k)
    back = CategoricalLeaf().set_param_arrays(old)
    np.testing.assert_allclose(back.probs(np.arange(L)),
                               CategoricalLeaf(alpha=0.3).fit(x, leaf, cell).probs(np.arange(L)))


def test_uniform_levels_with_atoms_keep_each_leafs_share_at_the_spike():
    """Issue 11 (RFDE/DEF): a spike level keeps its rows' share in each leaf, the rest of the
    leaf's mass is uniform over its other allowed levels; a leaf without rows stays uniform."""
    from forestgen.leaves.uniform_levels import spike_levels

    k, L = 8, 4
    x = np.array([0, 0, 0, 5, 0, 6, 6, 0, 0, 0, 0, 1], float)
    leaf = np.array([0, 0, 0, 0, 1, 1, 1, 2, 2, 2, 2, 2])
    assert spike_levels(x, k) == [0]  # 7/12 >= max(0.1, 2/8); level 6 (2/12) is not
    allowed = np.ones((L, k), bool)
    allowed[1, 0] = False  # leaf 1's cell excludes the atom (its row at 0 is outside)
    allowed[2, 4:] = False
    cell = ColumnCell(np.zeros(L), np.ones(L), allowed, 0.0, k - 1.0, n_levels=k)
    lm = UniformLevelsLeaf(atoms=[0]).fit(x, leaf, cell)
    p = lm.probs(np.arange(L))
    np.testing.assert_allclose(p.sum(1), 1.0)
    np.testing.assert_allclose(p[0], np.r_[0.75, np.full(7, 0.25 / 7)])
    np.testing.assert_allclose(p[1], np.r_[0.0, np.full(7, 1 / 7)])
    np.testing.assert_allclose(p[2], np.r_[0.8, np.full(3, 0.2 / 3), np.zeros(4)])
    np.testing.assert_allclose(p[3], np.full(8, 1 / 8))  # no rows: uniform
    assert np.all(lm.support_size() == (p > 0).sum(1))
    back = UniformLevelsLeaf(**lm.get_params()).set_param_arrays(lm.param_arrays())
    np.testing.assert_allclose(back.probs(np.arange(L)), p)


def test_auto_prior_follows_the_leave_one_out_likelihood():
    """``prior="auto"``: weak where leaves determine the level, strong where the column is
    independent of the leaves; the choice maximises the leave-one-out likelihood."""
    from forestgen.leaves.categorical import PRIOR_GRID

    rng = np.random.default_rng(0)
    L, k, n = 200, 10, 600
    leaf = rng.integers(0, L, n)
    cell = ColumnCell(np.zeros(L), np.ones(L), np.ones((L, k), bool), 0.0, k - 1.0, n_levels=k)
    noise = rng.integers(0, k, n).astype(float)  # the leaves know nothing about it
    pure = (leaf % k).astype(float)  # the leaf fixes the level
    mostly = np.where(rng.random(n) < 0.9, pure, noise)
    strong = CategoricalLeaf(prior="auto").fit(noise, leaf, cell).prior_
    weak = CategoricalLeaf(prior="auto").fit(pure, leaf, cell).prior_
    mid = CategoricalLeaf(prior="auto").fit(mostly, leaf, cell).prior_
    assert weak == PRIOR_GRID[0] and strong >= 10 and weak < mid < strong

    # the closed form matches the brute-force leave-one-out likelihood (refit without each
    # row; g then also drops the row, so allow one grid step)
    n2, L2 = 100, 30
    x2, leaf2 = mostly[:n2], leaf[:n2] % L2
    cell2 = ColumnCell(np.zeros(L2), np.ones(L2), np.ones((L2, k), bool), 0.0, k - 1.0,
                       n_levels=k)

    def loo(a):
        total = 0.0
        for i in range(n2):
            keep = np.arange(n2) != i
            lm = CategoricalLeaf(prior=a).fit(x2[keep], leaf2[keep], cell2)
            total += lm.log_prob(leaf2[i:i + 1], x2[i:i + 1])[0]
        return total

    best = PRIOR_GRID.index(max(PRIOR_GRID, key=loo))
    chosen = PRIOR_GRID.index(CategoricalLeaf(prior="auto").fit(x2, leaf2, cell2).prior_)
    assert abs(best - chosen) <= 1, (PRIOR_GRID[best], PRIOR_GRID[chosen])
