"""NRGBoost components on small enumerable grids: spec nrgboost_def.md §10 (T6, T7, T8, T9,
T10, T11, T12, T15)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from numba import njit

from forestgen.families.energy.ensembler import AdditiveEnergy, line_search, log_z_step
from forestgen.families.energy.gibbs import GibbsSampler, SamplePool
from forestgen.families.energy.grid import Grid
from forestgen.families.energy.leaf import ConstantEnergyLeaf
from forestgen.families.energy.splitter import EnergySplitter, grid_data
from forestgen.splitters.base import GrowLimits


def make_grid(n_values, ordered, missing=None):
    d = len(n_values)
    empty = [np.empty(0)] * d
    return Grid(empty, empty, empty, np.asarray(n_values, np.int64),
                np.zeros(d, bool) if missing is None else np.asarray(missing, bool),
                np.asarray(ordered, bool), np.ones(d, bool))


class Grown:
    """An energy tree's record with its node masses unpacked (``P``, ``Q`` per node)."""

    def __init__(self, record):
        self.record = record
        self.feature, self.left, self.right = record.feature, record.left, record.right
        self.is_leaf = record.feature < 0
        self.P, self.Q = record.node_mass.T


def grow_tree(splitter, max_leaves, grid, data_codes, data_w, model_codes, model_w, q0, rng):
    """One tree through the splitter contract on grid codes ``[d, n]``."""
    data = grid_data(grid, data_codes, model_codes, model_w, q0)
    return Grown(splitter.grow(data, None, data_w, rng,
                               GrowLimits(max_features=1.0, max_leaves=max_leaves)))


@njit
def gradhess_gain(left, right):
    """``G^2/H`` summed over the children minus the parent, ``G = P - Q``, ``H = Q``."""
    G, H = left[0] + right[0] - left[1] - right[1], left[1] + right[1]
    gl, gr = left[0] - left[1], right[0] - right[1]
    return gl * gl / left[1] + gr * gr / right[1] - G * G / H


def all_cells(grid):
    return np.array(list(itertools.product(*[range(int(c)) for c in grid.n_codes])), np.int32)


def random_energy(grid, n_trees, rng, leaves=8, step=0.7, after_each=None):
    """An energy whose trees separate random data masses from the exact model mass
    (``after_each(energy)`` is called after each tree)."""
    cells = all_cells(grid)
    e = AdditiveEnergy(grid, np.concatenate([np.log(np.full(c, 1.0 / c)) for c in grid.n_codes]))
    for _ in range(n_trees):
        P = rng.dirichlet(np.full(len(cells), 0.3))
        q = exp_norm(e.energy(cells))
        tree = grow_tree(EnergySplitter(max_ratio=4.0), leaves,
            grid, cells.T.copy(), P, cells.T.copy(), q, None, rng)
        lf = tree.is_leaf
        val = np.zeros(len(tree.feature))
        val[lf] = step * ConstantEnergyLeaf().values(tree.P[lf], tree.Q[lf])
        e.trees.append(tree.record, val, grid)
        if after_each is not None:
            after_each(e)
    return e, cells


def exp_norm(f):
    p = np.exp(f - f.max())
    return p / p.sum()


GRID = make_grid([5, 7, 4, 3], [True, True, True, False])


def test_t10_slice_traversal_matches_pointwise_energy():
    rng = np.random.default_rng(0)
    grid = make_grid([5, 7, 4, 3, 3], [True, True, True, False, True], [0, 0, 0, 0, 1])
    e, cells = random_energy(grid, 6, rng, leaves=12)
    X = cells[rng.choice(len(cells), 40, replace=False)]
    for j in range(grid.d):
        sl = e.energy_slice(X, j, full=True)
        for k in range(int(grid.n_codes[j])):
            Xk = X.copy()
            Xk[:, j] = k
            np.testing.assert_allclose(sl[:, k], e.energy(Xk), atol=1e-12)
        # full=False differs from full=True by a constant per row
        part = e.energy_slice(X, j, full=False)
        diff = sl - part
        np.testing.assert_allclose(diff, diff[:, :1].repeat(diff.shape[1], 1), atol=1e-12)


def test_t6_t9_leaf_algebra_with_exact_masses():
    rng = np.random.default_rng(1)
    cells = all_cells(GRID)
    P = rng.dirichlet(np.full(len(cells), 0.5))
    Q = rng.dirichlet(np.full(len(cells), 5.0))
    R = 3.0
    trees = {}
    # the built-in energy gain (a criterion of the shared kernels) and a user @njit
    # gradient-Hessian gain (spec §3.2: the linear terms cancel) grow the same tree
    for crit in ("energy", gradhess_gain):
        trees[crit] = grow_tree(EnergySplitter(criterion=crit, max_ratio=R), 16, GRID,
                                cells.T.copy(), P, cells.T.copy(), Q, None,
                                np.random.default_rng(5))
    a, b = trees["energy"], trees[gradhess_gain]
    for name in ("feature", "threshold", "nan_left", "cat_left", "node_mass"):
        np.testing.assert_array_equal(getattr(a.record, name), getattr(b.record, name))
    lf = a.is_leaf
    w = ConstantEnergyLeaf().values(a.P[lf], a.Q[lf])
    assert abs(np.sum(a.Q[lf] * w)) < 1e-12  # sum_j Q_j w_j = 0
    assert w.min() >= -1 - 1e-12 and w.max() <= R - 1 + 1e-12  # T9 range
    # the sum of split gains is sum_j P_j^2/Q_j - 1 (twice the quadratic model's gain)
    internal = np.nonzero(~lf)[0]
    gains = [a.P[a.left[n]] ** 2 / a.Q[a.left[n]] + a.P[a.right[n]] ** 2 / a.Q[a.right[n]]
             - a.P[n] ** 2 / a.Q[n] for n in internal]
    assert np.sum(gains) == pytest.approx(np.sum(a.P[lf] ** 2 / a.Q[lf]) - 1, abs=1e-12)
    # T9 bound: ΔL(α) >= α(χ² − αR²/8) with exact masses
    chi2 = np.sum(a.P[lf] ** 2 / a.Q[lf]) - 1
    for alpha in np.logspace(-3, 1, 21):
        dl = alpha * a.P[lf] @ w - np.log(a.Q[lf] @ np.exp(alpha * w))
        assert dl >= alpha * (chi2 - alpha * R ** 2 / 8) - 1e-12


def test_t7_line_search_objective_is_the_exact_likelihood_change():
    rng = np.random.default_rng(2)
    e, cells = random_energy(GRID, 3, rng)
    f = e.energy(cells)
    data = rng.dirichlet(np.full(len(cells), 0.5))
    q = exp_norm(f)
    tree = grow_tree(EnergySplitter(), 10, GRID, cells.T.copy(), data, cells.T.copy(), q,
                                              None, rng)
    lf = tree.is_leaf
    w = ConstantEnergyLeaf().values(tree.P[lf], tree.Q[lf])
    e.trees.append(tree.record, np.where(lf, 0.0, 0.0), GRID)
    leaf_node = e.tree_leaves(cells, e.trees.n_trees - 1) - e.trees.node_offsets[-2]
    wmap = np.zeros(len(tree.feature))
    wmap[lf] = w
    dF = wmap[leaf_node]

    def L(g):
        return data @ g - np.logaddexp.reduce(g)

    for alpha in (0.01, 0.3, 1.0, 4.0):
        brute = L(f + alpha * dF) - L(f)
        eq43 = alpha * tree.P[lf] @ w - np.log(tree.Q[lf] @ np.exp(alpha * w))
        assert eq43 == pytest.approx(brute, abs=1e-10)
    alpha, gain = line_search(tree.P[lf], tree.Q[lf], w)
    assert gain == pytest.approx(L(f + alpha * dF) - L(f), abs=1e-10)


def _eight_gaussians(n, rng):
    ang = 2 * np.pi * rng.integers(0, 8, n) / 8
    return np.c_[8 * np.cos(ang), 8 * np.sin(ang)] + rng.normal(size=(n, 2))


def _toy_codes(n_bins, n, rng):
    edges = np.linspace(-11, 11, n_bins + 1)
    X = np.clip(_eight_gaussians(n, rng), -10.999, 10.999)
    return np.searchsorted(edges[1:-1], X, side="right").astype(np.int32)


def test_t8_exact_masses_never_decrease_training_likelihood():
    rng = np.random.default_rng(3)
    grid = make_grid([20, 20], [True, True])
    C = _toy_codes(20, 3000, rng)
    cells = all_cells(grid)
    p = np.bincount(C[:, 0] * 20 + C[:, 1], minlength=400) / len(C)
    for gamma in (0.1, 0.5, 1.0):
        e = AdditiveEnergy(grid, np.log(np.full(40, 1 / 20)))
        prev = -np.inf
        for _ in range(50):
            f = e.energy(cells)
            q = exp_norm(f)
            ll = p @ f - np.logaddexp.reduce(f)
            assert ll >= prev - 1e-12
            prev = ll
            tree = grow_tree(EnergySplitter(), 16, grid, cells.T.copy(), p, cells.T.copy(),
                                                      q, None, rng)
            lf = tree.is_leaf
            if lf.sum() < 2:
                break
            w = ConstantEnergyLeaf().values(tree.P[lf], tree.Q[lf])
            alpha, _ = line_search(tree.P[lf], tree.Q[lf], w)
            val = np.zeros(len(tree.feature))
            val[lf] = gamma * alpha * w
            e.trees.append(tree.record, val, grid)
        assert prev > p @ np.log(np.full(400, 1 / 400)) + 0.5  # it learned something


def test_t11_gibbs_is_stationary_for_the_enumerated_model_and_respects_clamps():
    rng = np.random.default_rng(4)
    grid = make_grid([4, 5, 3], [True, True, False])
    e, cells = random_energy(grid, 5, rng, leaves=6, step=1.0)
    q = exp_norm(e.energy(cells))
    X0 = e.sample_q0(128, rng)
    rec = GibbsSampler().run(e, X0, n_sweeps=2200, record_from=200, thin=1, n_records=2000,
                             rng=rng)
    flat = rec.reshape(-1, 3)
    emp = np.bincount((flat[:, 0] * 5 + flat[:, 1]) * 3 + flat[:, 2], minlength=60) / len(flat)
    assert 0.5 * np.abs(emp - q).sum() < 0.02
    # clamp column 1 to code 2: chains follow q(x0, x2 | x1 = 2)
    X0[:, 1] = 2
    rec = GibbsSampler().run(e, X0, n_sweeps=1200, record_from=200, thin=1, n_records=1000,
                             rng=rng, free_cols=np.array([0, 2]))
    flat = rec.reshape(-1, 3)
    assert np.all(flat[:, 1] == 2)
    sel = cells[:, 1] == 2
    qc = q[sel] / q[sel].sum()
    emp = np.bincount(flat[:, 0] * 3 + flat[:, 2], minlength=12) / len(flat)
    assert 0.5 * np.abs(emp - qc).sum() < 0.02


def test_gibbs_is_reproducible_and_independent_of_thread_count():
    import numba

    rng = np.random.default_rng(5)
    e, _ = random_energy(GRID, 4, rng)
    X0 = e.sample_q0(70, np.random.default_rng(0))  # blocks of 64 + 6 (1 thread), 35 + 35
    kw = dict(n_sweeps=30, record_from=5, thin=5, n_records=5)
    a = GibbsSampler().run(e, X0, rng=np.random.default_rng(9), **kw)
    old = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        b = GibbsSampler().run(e, X0, rng=np.random.default_rng(9), **kw)
    finally:
        numba.set_num_threads(old)
    np.testing.assert_array_equal(a, b)


def test_t12_rejection_from_q0_gives_exact_one_tree_samples():
    rng = np.random.default_rng(6)
    grid = make_grid([4, 5, 3], [True, True, False])
    e, cells = random_energy(grid, 1, rng, leaves=6, step=0.8)
    pool = SamplePool(size=60_000)
    pool.start(e, rng)
    C = pool.codes
    assert C.shape == (60_000, 3)
    q = exp_norm(e.energy(cells))
    cnt = np.bincount((C[:, 0] * 5 + C[:, 1]) * 3 + C[:, 2], minlength=60)
    from scipy.stats import chisquare

    assert chisquare(cnt, q * len(C)).pvalue > 0.001
    np.testing.assert_allclose(pool.weights(), 1 / 60_000, rtol=1e-12)


def test_t15_pool_bookkeeping():
    rng = np.random.default_rng(7)
    grid = make_grid([4, 5, 3], [True, True, False])
    e, cells = random_energy(grid, 2, rng, leaves=6, step=0.3)
    pool = SamplePool(size=20_000, p_refresh=0.1, n_chains=8, burn_in=10)
    pool.start(e, rng)
    data = cells[rng.integers(0, len(cells), 100)]
    for _ in range(3):
        pool.update(e, data, rng)
        dropped, ess, refilled = pool.history[-1]
        assert len(pool.codes) == 20_000 and len(pool.log_weight) == 20_000
        assert abs(dropped / 20_000 - 0.1) < 0.01
        assert refilled == dropped  # survivors are reweighted, not rejected
        assert 0 < ess <= 20_000


def _cell_id(C, grid):
    return np.ravel_multi_index(tuple(C.T), tuple(int(c) for c in grid.n_codes))


def test_pool_reweighting_tracks_the_new_model():
    """Exact draws of q_1, reweighted by tree 2 (only its values are evaluated), estimate the
    masses of q_2 — with and without a Gibbs refill of half the pool."""
    rng = np.random.default_rng(11)
    grid = make_grid([4, 5, 3], [True, True, False])
    e2, cells = random_energy(grid, 2, rng, leaves=6, step=0.8)
    e1 = AdditiveEnergy(grid, e2.log_q0, e2.trees.truncate(1))
    q2 = exp_norm(e2.energy(cells))
    for p_refresh in (0.0, 0.5):
        pool = SamplePool(size=60_000, p_refresh=p_refresh, n_chains=16, burn_in=20,
                          min_ess=0.0)
        pool.start(e1, rng)
        pool.update(e2, cells, rng)
        est = np.bincount(_cell_id(pool.codes, grid), weights=pool.weights(),
                          minlength=len(cells))
        unweighted = np.bincount(_cell_id(pool.codes, grid), minlength=len(cells)) / 60_000
        tv = 0.5 * np.abs(est - q2).sum()
        assert tv < 0.02, (p_refresh, tv)
        if p_refresh == 0.0:  # the weights are what moves the pool from q_1 to q_2
            assert 0.5 * np.abs(unweighted - q2).sum() > 3 * tv


def test_pool_resamples_when_the_weights_degenerate():
    rng = np.random.default_rng(12)
    grid = make_grid([4, 5, 3], [True, True, False])
    e2, cells = random_energy(grid, 2, rng, leaves=6, step=3.0)
    e1 = AdditiveEnergy(grid, e2.log_q0, e2.trees.truncate(1))
    pool = SamplePool(size=5_000, p_refresh=0.0, min_ess=0.99)
    pool.start(e1, rng)
    pool.update(e2, cells, rng)
    assert pool.history[-1][1] < 0.99 * 5_000
    np.testing.assert_array_equal(pool.log_weight, np.zeros(5_000))


class CountingSampler(GibbsSampler):
    """Counts the tree evaluations of every run: chains x sweeps x trees."""

    def __init__(self):
        super().__init__()
        self.evals = 0

    def run(self, energy, X0, *, n_sweeps, **kw):
        self.evals += len(X0) * n_sweeps * energy.trees.n_trees
        return super().run(energy, X0, n_sweeps=n_sweeps, **kw)


def _boosted_pool(refill_trees, n_trees, size, seed, step=0.3):
    """A pool carried through ``n_trees`` rounds of a random energy on a 60-cell grid; per
    round, the pool size and the Gibbs tree evaluations counted by the sampler."""
    grid = make_grid([4, 5, 3], [True, True, False])
    counter = CountingSampler()
    pool = SamplePool(size=size, p_refresh=0.1, n_chains=16, burn_in=20,
                      refill_trees=refill_trees, sampler=counter)
    prng = np.random.default_rng(100 + seed)
    sizes, evals = [], []

    def each(e):
        before = counter.evals
        if e.trees.n_trees == 1:
            pool.start(e, prng)
        else:
            pool.update(e, np.zeros((4, 3), np.int32), prng)
        sizes.append(len(pool.codes))
        evals.append(counter.evals - before)

    e, cells = random_energy(grid, n_trees, np.random.default_rng(seed), leaves=6, step=step,
                             after_each=each)
    return grid, e, cells, pool, sizes, evals


def test_flat_refill_spends_a_constant_budget_and_keeps_the_pool_size():
    """The paper's refill costs ~p_refresh M t tree evaluations at t trees (quadratic fit);
    the flat refill at most B = p_refresh M k once warm, equal up to rounding for every t."""
    M, k = 8_000, 3
    B = 0.1 * M * k
    for refill_trees in (None, k):
        _, _, _, pool, sizes, evals = _boosted_pool(refill_trees, 40, M, 0, step=0.1)
        assert sizes == [M] * 40 and len(pool.log_weight) == M
        assert evals[0] == 0  # round 2: exact rejection from q0, no Gibbs
        assert evals[1:] == pool.tree_evals
        warm = np.array(evals[2:])  # after the one burn-in (16 chains x 20 sweeps, 2 trees)
        t = np.arange(3, 41)
        if refill_trees is None:  # ceil(dropped / 16) sweeps x 16 chains x t trees
            np.testing.assert_allclose(warm / t, 0.1 * M, rtol=0.1)
        else:  # 16 round(B / (16 t)) sweeps x t trees: B up to half a sweep of 16 chains
            assert np.all(np.abs(warm - B) <= 8 * t)
    # well below k trees (budget above the dropped count) the two schemes are the same
    a, b = _boosted_pool(None, 4, M, 1)[3], _boosted_pool(5, 4, M, 1)[3]
    np.testing.assert_array_equal(a.codes, b.codes)
    np.testing.assert_array_equal(a.log_weight, b.log_weight)


def test_flat_refill_pool_matches_the_exact_model_as_the_papers_does():
    """After 15 rounds on an enumerable grid, 3,000 draws from each pool (by weight) pass a
    chi-square test against the exact model, and fail against the model one tree behind."""
    from scipy.stats import chisquare

    for refill_trees in (None, 2):
        grid, e, cells, pool, _, _ = _boosted_pool(refill_trees, 15, 40_000, 0)
        q = exp_norm(e.energy(cells))
        behind = exp_norm(AdditiveEnergy(grid, e.log_q0, e.trees.truncate(14)).energy(cells))
        est = np.bincount(_cell_id(pool.codes, grid), weights=pool.weights(),
                          minlength=len(cells))
        assert 0.5 * np.abs(est - q).sum() < 0.025
        draws = np.random.default_rng(7).choice(len(pool.codes), 3000, p=pool.weights())
        cnt = np.bincount(_cell_id(pool.codes[draws], grid), minlength=len(cells))
        assert chisquare(cnt, q * 3000).pvalue > 0.001, refill_trees
        assert chisquare(cnt, behind * 3000).pvalue < 1e-6, refill_trees


def test_log_z_step_is_exact_with_exact_masses():
    rng = np.random.default_rng(8)
    e, cells = random_energy(GRID, 3, rng)
    f = e.energy(cells)
    q = exp_norm(f)
    tree = grow_tree(EnergySplitter(), 8, GRID, cells.T.copy(),
                                             rng.dirichlet(np.ones(len(cells))),
                                             cells.T.copy(), q, None, rng)
    lf = tree.is_leaf
    v = 0.4 * ConstantEnergyLeaf().values(tree.P[lf], tree.Q[lf])
    val = np.zeros(len(tree.feature))
    val[lf] = v
    logz0 = np.logaddexp.reduce(f)
    e.trees.append(tree.record, val, GRID)
    logz1 = np.logaddexp.reduce(e.energy(cells))
    assert logz0 + log_z_step(tree.Q[lf], v) == pytest.approx(logz1, abs=1e-10)


def test_first_round_analytic_masses_equal_enumerated_product_masses():
    rng = np.random.default_rng(9)
    cells = all_cells(GRID)
    logq0 = np.concatenate([np.log(rng.dirichlet(np.ones(c))) for c in GRID.n_codes])
    e = AdditiveEnergy(GRID, logq0)
    q = np.exp(e.energy(cells))
    P = rng.dirichlet(np.full(len(cells), 0.5))
    sp = EnergySplitter()
    a = grow_tree(sp, 12, GRID, cells.T.copy(), P, None, None, np.exp(logq0),
                  np.random.default_rng(1))
    b = grow_tree(sp, 12, GRID, cells.T.copy(), P, cells.T.copy(), q, None,
                  np.random.default_rng(1))
    np.testing.assert_array_equal(a.feature, b.feature)
    np.testing.assert_allclose(a.Q, b.Q, atol=1e-12)


def test_greedy_multiplicative_boosting_round_is_exactly_normalised():
    """App. C: KL gain with leaf energy log(P/Q) multiplies q by P_j/Q_j per leaf, so log Z
    stays 0 and the training log-likelihood rises by exactly sum_j P_j log(P_j/Q_j)."""
    rng = np.random.default_rng(10)
    cells = all_cells(GRID)
    e = AdditiveEnergy(GRID, np.concatenate([np.log(np.full(c, 1.0 / c))
                                             for c in GRID.n_codes]))
    p = rng.dirichlet(np.full(len(cells), 2.0))
    q = exp_norm(e.energy(cells))
    tree = grow_tree(EnergySplitter(criterion="kl", max_ratio=None), 12,
        GRID, cells.T.copy(), p, cells.T.copy(), q, None, rng)
    lf = tree.is_leaf
    val = np.zeros(len(tree.feature))
    val[lf] = ConstantEnergyLeaf(form="log").values(tree.P[lf], tree.Q[lf])
    before = p @ e.energy(cells)
    e.trees.append(tree.record, val, GRID)
    f = e.energy(cells)
    assert np.logaddexp.reduce(f) == pytest.approx(0.0, abs=1e-12)
    kl_gain = np.sum(tree.P[lf] * np.log(tree.P[lf] / tree.Q[lf]))
    assert p @ f - before == pytest.approx(kl_gain, abs=1e-12)


def test_nrgboost_takes_splitter_like_every_learner(tmp_path):
    """``splitter=`` on NRGBoost: an instance, or a user @njit gain run in the energy kernel,
    gives the built-in's trees; a splitter without node masses is refused by name; the
    splitter is saved as a component."""
    import pandas as pd

    from forestgen import NRGBoost
    from forestgen.base import GenerativeForest

    rng = np.random.default_rng(12)
    x = rng.normal(size=300)
    df = pd.DataFrame({"x": x, "y": x + rng.normal(size=300), "c": rng.choice(list("pqr"), 300)})
    kw = dict(n_trees=4, max_leaves=8, pool_size=2000, gibbs_chains=4, gibbs_burn_in=10,
              n_normaliser_samples=2000, random_state=0)
    base = NRGBoost(**kw).fit(df).energy_.trees.to_arrays()
    for splitter in (EnergySplitter(max_ratio=2.0), gradhess_gain):
        m = NRGBoost(splitter=splitter, **kw).fit(df)
        for k, v in m.energy_.trees.to_arrays().items():
            np.testing.assert_array_equal(v, base[k], err_msg=k)
    m = NRGBoost(splitter=EnergySplitter(criterion="kl"), **kw).fit(df)
    assert not np.array_equal(m.energy_.trees.value, base["trees.value"])
    m2 = GenerativeForest.load(m.save(tmp_path / "m.forestgen"))
    assert m2.splitter.get_params() == {"criterion": "kl", "max_ratio": 2.0}
    with pytest.raises(ValueError, match="DensitySplitter"):
        NRGBoost(splitter="density", **kw).fit(df)


def test_leaf_bitset_slices_match_pointwise_energy_with_multiword_sets():
    # > 64 leaves (two-word leaf sets), a nominal column with > 64 codes (two code words),
    # missing codes on an ordered and a nominal column
    rng = np.random.default_rng(11)
    grid = make_grid([40, 70, 4], [True, False, True], [1, 0, 1])
    e, cells = random_energy(grid, 3, rng, leaves=100, step=0.5)
    assert e.trees.leaf_sets(grid).words == 2
    X = cells[rng.choice(len(cells), 60, replace=False)]
    for j in range(grid.d):
        sl = e.energy_slice(X, j, full=True)
        for k in range(int(grid.n_codes[j])):
            Xk = X.copy()
            Xk[:, j] = k
            np.testing.assert_allclose(sl[:, k], e.energy(Xk), atol=1e-12)


def test_leaf_sets_cache_grows_with_the_trees():
    from forestgen.families.energy.ensembler import EnergyTrees

    grid = make_grid([6, 5, 4], [True, False, True], [0, 1, 0])
    seen = []
    e, _ = random_energy(grid, 4, np.random.default_rng(12), leaves=8,
                         after_each=lambda e: seen.append(e.trees.leaf_sets(grid).n_trees))
    assert seen == [1, 2, 3, 4]  # extended by one tree per call
    fresh = EnergyTrees.from_arrays(e.trees.to_arrays()).leaf_sets(grid)
    for a, b in zip(e.trees.leaf_sets(grid).view(e.trees.value), fresh.view(e.trees.value)):
        np.testing.assert_array_equal(a, b)


def _replay_against_brute_force(grid, e, X0, free, n_sweeps=8):
    """Replays the kernel's random stream with conditionals enumerated from ``energy``: the
    chains must agree exactly (the fast slices change no draw)."""
    from forestgen.families.energy.gibbs import _uniform, chain_seeds

    rec = GibbsSampler().run(e, X0, n_sweeps=n_sweeps, record_from=0, thin=1,
                             n_records=n_sweeps, rng=np.random.default_rng(3), free_cols=free)
    seeds = chain_seeds(np.random.default_rng(3), len(X0))
    for ch in range(len(X0)):
        x = X0[ch].copy()
        st = seeds[ch:ch + 1].copy()
        for sweep in range(n_sweeps):
            for j in free:
                Xk = np.repeat(x[None], grid.n_codes[j], 0)
                Xk[:, j] = np.arange(grid.n_codes[j])
                p = exp_norm(e.energy(Xk))
                x[j] = min(np.searchsorted(np.cumsum(p), _uniform(st, 0), side="right"),
                           len(p) - 1)
            np.testing.assert_array_equal(rec[ch, sweep], x)


def test_gibbs_sweep_draws_from_the_brute_force_conditional():
    rng = np.random.default_rng(13)
    grid = make_grid([6, 5, 4, 3], [True, False, True, True], [1, 0, 0, 1])
    e, _ = random_energy(grid, 5, rng, leaves=10, step=1.0)
    _replay_against_brute_force(grid, e, e.sample_q0(6, rng), np.array([0, 1, 3]))


def test_gibbs_sweep_replay_with_a_wide_nominal_column_and_two_words():
    # a nominal column of 71 codes (more than NOMINAL_DENSE: added bit by bit), one of 9 (a
    # leaf's value added to every code, 0 outside it), missing codes, two-word leaf sets,
    # 5 chains (a padded group of 4)
    from forestgen.families.energy.gibbs import NOMINAL_DENSE

    assert 9 <= NOMINAL_DENSE < 71
    rng = np.random.default_rng(16)
    grid = make_grid([7, 70, 9, 4], [True, False, False, True], [1, 1, 0, 1])
    e, _ = random_energy(grid, 3, rng, leaves=90, step=1.0)
    assert e.trees.leaf_sets(grid).words == 2
    _replay_against_brute_force(grid, e, e.sample_q0(5, rng), np.arange(4), n_sweeps=5)


def test_gibbs_sweep_replay_with_trees_of_one_and_two_columns():
    # trees of 2 and 3 leaves split on one or two of the three columns: lines at a tree's
    # first position (no prefix), its last (no suffix), and both at once (every leaf slot)
    rng = np.random.default_rng(17)
    grid = make_grid([6, 5, 4], [True, False, True], [1, 0, 0])
    for leaves in (2, 3):
        e, _ = random_energy(grid, 6, rng, leaves=leaves, step=1.0)
        sets = e.trees.leaf_sets(grid)
        n_cols = np.diff(sets.col_ptr)
        assert n_cols.min() == 1 and (leaves == 2 or n_cols.max() == 2)
        _replay_against_brute_force(grid, e, e.sample_q0(5, rng), np.arange(3), n_sweeps=4)


def test_chain_seeds_are_numpys_spawned_seed_sequences():
    from forestgen.families.energy.gibbs import chain_seeds, spawned_seeds

    for entropy in (0, 1, 2**32 - 1, 2**32, 123_456_789_012_345_678, 2**63 - 1):
        kids = np.random.SeedSequence(entropy).spawn(300)
        want = np.array([k.generate_state(1, np.uint64)[0] for k in kids], np.uint64)
        np.testing.assert_array_equal(spawned_seeds(entropy, 300), want)
    assert len(spawned_seeds(5, 0)) == 0
    e = int(np.random.default_rng(4).integers(0, 2**63 - 1))
    np.testing.assert_array_equal(chain_seeds(np.random.default_rng(4), 7),
                                  spawned_seeds(e, 7))


@pytest.mark.parametrize("n_values, dtype", [(255, np.uint8), (256, np.uint16),
                                              (65_535, np.uint16), (65_536, np.int32)])
def test_leaf_bitset_slices_on_a_column_of_many_values(n_values, dtype):
    rng = np.random.default_rng(14)
    grid = make_grid([n_values, 2], [True, True], [1, 0])
    e, cells = random_energy(grid, 1, rng, leaves=6)
    assert e.trees.leaf_sets(grid).span.dtype == dtype  # the smallest that holds the ends
    X = cells[rng.choice(len(cells), 5, replace=False)]
    sl = e.energy_slice(X, 0, full=True)
    for i in range(len(X)):
        Xk = np.repeat(X[i:i + 1], grid.n_codes[0], 0)
        Xk[:, 0] = np.arange(grid.n_codes[0])
        np.testing.assert_allclose(sl[i], e.energy(Xk), atol=1e-12)


def test_leaf_bitset_energy_equals_the_tree_walk_bit_for_bit():
    # two-word leaf sets, a nominal column of > 64 codes, missing codes; every tree range
    from forestgen.families.energy.ensembler import energy_kernel
    from forestgen.families.energy.leaf_sets import leaf_energy_kernel

    rng = np.random.default_rng(15)
    grid = make_grid([40, 70, 4], [True, False, True], [1, 0, 1])
    e, cells = random_energy(grid, 4, rng, leaves=100, step=0.5)
    tr = e.trees
    X = cells[rng.choice(len(cells), 500, replace=False)]
    view = tr.leaf_sets(grid).view(tr.value)
    for start, stop in [(0, 4), (1, 3), (3, 4), (2, 2)]:
        walk = energy_kernel(X, tr.roots[start:stop], *tr.args())
        for kernel in (leaf_energy_kernel.parallel, leaf_energy_kernel.serial):
            for block in (1, 7, 256):
                np.testing.assert_array_equal(
                    kernel(X, start, stop, grid.code_offsets, view, block), walk)
        np.testing.assert_array_equal(e.tree_energy(X, start, stop), walk)
    assert not np.all(e.tree_energy(X) == 0)


def _lumped_chisquare_p(draws, p):
    """Chi-square p-value of integer ``draws`` against probabilities ``p``, cells expecting
    fewer than 5 draws lumped into one."""
    from scipy.stats import chisquare

    n = len(draws)
    cnt = np.bincount(draws, minlength=len(p)).astype(float)
    assert cnt[p == 0].sum() == 0  # never a code of probability zero
    big = p * n >= 5
    obs = np.r_[cnt[big], cnt[~big].sum()]
    exp = np.r_[p[big], p[~big].sum()] * n
    keep = exp > 0
    if keep.sum() < 2:  # one possible code: the assert above is the whole test
        return 1.0
    return chisquare(obs[keep], exp[keep] * obs[keep].sum() / exp[keep].sum()).pvalue


@pytest.mark.parametrize("temperature", [1.0, 2.0])
def test_gibbs_update_draws_the_exact_conditional_law(temperature):
    """One Gibbs update of one column, from the same row in many chains: the drawn codes follow
    ``softmax_k(f(x with x_j := k) / temperature)`` enumerated from ``energy``, restricted to
    the allowed codes (two-word leaf sets, a nominal column of > 64 codes, missing codes, and
    trees that split on ``j`` but are constant along it for the row)."""
    from forestgen.families.energy.leaf_sets import line_leaves

    rng = np.random.default_rng(21)
    grid = make_grid([40, 70, 4, 3], [True, False, True, False], [1, 0, 1, 0])
    e, cells = random_energy(grid, 4, rng, leaves=100, step=1.0)
    assert e.trees.leaf_sets(grid).words == 2
    off = grid.code_offsets
    n = 40_000
    sets = e.trees.leaf_sets(grid)
    line = np.empty(sets.words, np.uint64)
    crossed = []
    for x in cells[rng.choice(len(cells), 2, replace=False)]:
        for j in range(grid.d):
            for t in range(sets.n_trees):
                if j not in sets.cols[sets.col_ptr[t]: sets.col_ptr[t + 1]]:
                    continue
                line_leaves(x, j, t, off, sets.code_row, sets.masks, sets.col_ptr, sets.cols,
                            line)
                crossed.append(sum(bin(int(w)).count("1") for w in line))
            nc = int(grid.n_codes[j])
            Xk = np.repeat(x[None], nc, 0)
            Xk[:, j] = np.arange(nc)
            f = e.energy(Xk) / temperature
            allowed = np.ones((2, int(off[-1])), np.uint8)
            allowed[1, off[j]: off[j] + nc: 2] = 0  # chains reading row 1: odd codes only
            arow = np.arange(n) % 2
            rec = GibbsSampler(temperature=temperature).run(
                e, np.repeat(x[None], n, 0), n_sweeps=1, record_from=0, thin=1, n_records=1,
                rng=np.random.default_rng(j), free_cols=np.array([j]), allowed=allowed,
                allowed_row=arow)[:, 0]
            others = np.delete(np.arange(grid.d), j)
            np.testing.assert_array_equal(rec[:, others], np.repeat(x[None, others], n, 0))
            for a in (0, 1):
                p = np.where(allowed[a, off[j]: off[j] + nc] == 1, np.exp(f - f.max()), 0.0)
                assert _lumped_chisquare_p(rec[arow == a, j], p / p.sum()) > 1e-4
    assert min(crossed) == 1 < max(crossed)  # some lines skipped as constant, some summed


def test_exp_below_is_within_one_ulp_of_exp():
    import math

    from forestgen.families.energy.gibbs import EXP_FLOOR, exp_below_array

    x = np.r_[np.linspace(EXP_FLOOR + 1e-9, 0.0, 200_001), -np.logspace(-20, 2, 2001), 0.0]
    ref = np.array([math.exp(v) for v in x])
    rel = np.abs(exp_below_array(x, 0.0) - ref) / ref
    assert rel.max() < 2.3e-16
    # shifted by the maximum; -inf and anything at or below the floor give exactly 0
    np.testing.assert_array_equal(
        exp_below_array(np.array([-np.inf, EXP_FLOOR + 2.0, 2.0, 1.0]), 2.0),
        [0.0, 0.0, 1.0, math.exp(-1.0)])
