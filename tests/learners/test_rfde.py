"""RFDE (Wen & Hang 2022): exact normalisation, data-independent partition, the T = ∞ kernel,
exact sampling, persistence, determinism, parameter errors (spec rfde.md §8)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from forestgen import RFDE, GenerativeForest
from forestgen.families.mixture.rfde import infinite_forest_density, theory_depth
from forestgen.splitters.base import Splitter
from forestgen.splitters.density import MidpointSplitter


def exact_box_mass(model, lower=None, upper=None, levels=None) -> float:
    """``sum_leaves weight * P(leaf ∩ box)``: exact probability of an axis-aligned box."""
    L = model.forest_.n_leaves
    leaf = np.arange(L)
    logm = model.leaf_log_weight_.copy()
    for j, lm in enumerate(model.leaf_models_):
        if lm.discrete:
            mask = np.ones(lm.n_levels, bool) if levels is None or j not in levels \
                else np.asarray(levels[j], bool)
            with np.errstate(divide="ignore"):
                logm = logm + lm.log_prob_levels(leaf, mask)
        else:
            lo = -np.inf if lower is None else lower[j]
            hi = np.inf if upper is None else upper[j]
            logm = logm + lm.log_prob_interval(leaf, np.full(L, lo), np.full(L, hi))
    return float(np.exp(logm).sum())


def grid_integral(model, n_per_axis: int, extra=None) -> float:
    """Midpoint rule of exp(log_prob) over the root box of the numeric columns."""
    lo, hi = model.box_lo_, model.box_hi_
    num = [j for j, lm in enumerate(model.leaf_models_) if not lm.discrete]
    axes = [lo[j] + (hi[j] - lo[j]) * (np.arange(n_per_axis) + 0.5) / n_per_axis for j in num]
    G = np.stack(np.meshgrid(*axes, indexing="ij"), -1).reshape(-1, len(num))
    if extra is not None:
        G = extra(G)
    dens = np.exp(model.log_prob(G, floor=None))
    return float(dens.mean() * np.prod((hi - lo)[num]))


@pytest.mark.parametrize("d,p", [(1, 9), (2, 8), (3, 6)])
def test_integrates_to_one(d, p):
    X = np.random.default_rng(d).beta(2, 5, size=(300, d))
    m = RFDE(n_trees=7, depth=p, smoothing=0, marginal_weight=0,
             cell_shape="uniform", random_state=0).fit(X)
    assert exact_box_mass(m) == pytest.approx(1.0, abs=1e-12)
    # fine dyadic midpoint grid: each depth-p cell holds the same number of grid points, so
    # the Riemann sum of the density is exact
    n_axis = 2**p  # a cell split S_j <= p times along j holds 2^(p - S_j) grid points
    assert grid_integral(m, n_axis) == pytest.approx(1.0, abs=1e-9)
    # every leaf is a dyadic cell of volume vol(B) 2^-p (numeric data)
    vol = np.prod([lm.hi_ - lm.lo_ for lm in m.leaf_models_], axis=0)
    np.testing.assert_allclose(vol, np.prod(m.box_hi_ - m.box_lo_) * 2.0 ** -p, rtol=1e-12)
    assert m.forest_.n_leaves <= 7 * min(300, 2**p)


def test_integrates_to_one_with_categorical_and_marginal():
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"x": rng.normal(size=400), "c": rng.choice(list("abcde"), 400),
                       "y": rng.exponential(size=400)})
    m = RFDE(n_trees=5, depth=7, marginal_weight=0, cell_shape="uniform", random_state=1).fit(df)
    assert exact_box_mass(m) == pytest.approx(1.0, abs=1e-12)
    codes = m.encoder_.schema["c"].categories
    total = 0.0
    for lev in codes:
        def add(G, lev=lev):
            return pd.DataFrame({"x": G[:, 0], "c": lev, "y": G[:, 1]})
        total += grid_integral(m, 2**7, add)
    assert total == pytest.approx(1.0, abs=1e-9)
    # NaN marginalisation: p(x) = sum over levels and integral over y
    x0 = pd.DataFrame({"x": [float(df.x.iloc[0])], "c": [None], "y": [np.nan]})
    lo, hi = m.box_lo_[2], m.box_hi_[2]
    ys = lo + (hi - lo) * (np.arange(2**7) + 0.5) / 2**7
    marg = 0.0
    for lev in codes:
        rows = pd.DataFrame({"x": float(df.x.iloc[0]), "c": lev, "y": ys})
        marg += np.exp(m.log_prob(rows, floor=None)).mean() * (hi - lo)
    assert np.exp(m.log_prob(x0, floor=None))[0] == pytest.approx(marg, rel=1e-9)


def test_partition_is_independent_of_data():
    rng = np.random.default_rng(1)
    X = rng.uniform(0.1, 0.9, size=(50, 2))
    A = np.vstack([X, rng.uniform(0, 1, size=(200, 2))])
    B = np.vstack([X, rng.normal(0.5, 0.1, size=(300, 2)).clip(0, 1)])
    box = {0: (0.0, 1.0), 1: (0.0, 1.0)}
    ma = RFDE(n_trees=6, depth=9, box=box, marginal_weight=0,
              cell_shape="uniform", random_state=3).fit(A)
    mb = RFDE(n_trees=6, depth=9, box=box, marginal_weight=0,
              cell_shape="uniform", random_state=3).fit(B)
    la, lb = ma.forest_.apply(X), mb.forest_.apply(X)
    for j in range(2):
        for attr in ("lo_", "hi_"):
            np.testing.assert_array_equal(getattr(ma.leaf_models_[j], attr)[la],
                                          getattr(mb.leaf_models_[j], attr)[lb])
    np.testing.assert_array_equal(ma.leaf_code_[la], mb.leaf_code_[lb])
    # a different seed gives a different partition
    mc = RFDE(n_trees=6, depth=9, box=box, marginal_weight=0,
              cell_shape="uniform", random_state=4).fit(A)
    assert not np.array_equal(ma.leaf_code_[la], mc.leaf_code_[mc.forest_.apply(X)])


def test_split_coordinates_are_uniform():
    # S_j(x) ~ Multinomial(p, 1/d) across trees: the side along j of x's leaf is 2^-S_j of B's
    X = np.random.default_rng(2).uniform(size=(200, 3))
    m = RFDE(n_trees=150, depth=6, smoothing=0, marginal_weight=0,
             cell_shape="uniform", random_state=5).fit(X)
    leaf = m.forest_.apply(X[:1])[0]
    side = np.stack([lm.hi_[leaf] - lm.lo_[leaf] for lm in m.leaf_models_], 1)
    S = np.rint(-np.log2(side / (m.box_hi_ - m.box_lo_))).astype(int)
    assert np.all(S.sum(1) == 6)
    assert stats.chisquare(S.sum(0)).pvalue > 1e-3


def test_infinite_forest_kernel_matches_large_forest():
    rng = np.random.default_rng(3)
    Xtr = rng.beta(2, 3, size=(25, 2))
    p, T = 4, 3000
    m = RFDE(n_trees=T, depth=p, smoothing=0, marginal_weight=0,
             cell_shape="uniform", random_state=0).fit(Xtr)
    Q = m.box_lo_ + (m.box_hi_ - m.box_lo_) * rng.uniform(0.05, 0.95, size=(12, 2))
    oracle = infinite_forest_density(m, Xtr, Q)
    leaves = m.forest_.apply(Q)
    per_tree = m.leaf_log_weight_[leaves] + math.log(T)
    for j, lm in enumerate(m.leaf_models_):
        per_tree += lm.log_prob(leaves.ravel(), np.repeat(Q[:, j], T)).reshape(leaves.shape)
    dens = np.exp(per_tree)
    mean, se = dens.mean(1), dens.std(1) / math.sqrt(T)
    np.testing.assert_allclose(mean, np.exp(m.log_prob(Q, floor=None)), rtol=1e-10)
    assert np.all(np.abs(mean - oracle) <= 4.5 * se + 1e-12)
    assert (oracle > 0).sum() >= 6


def test_sampler_matches_density_chi_square():
    X = np.random.default_rng(4).beta(2, 4, size=(400, 2))
    m = RFDE(n_trees=8, depth=6, random_state=0).fit(X)
    k = 6
    edges = [np.linspace(m.box_lo_[j], m.box_hi_[j], k + 1) for j in range(2)]
    probs = np.array([[exact_box_mass(m, [edges[0][a], edges[1][b]],
                                      [edges[0][a + 1], edges[1][b + 1]])
                       for b in range(k)] for a in range(k)]).ravel()
    assert probs.sum() == pytest.approx(1.0, abs=1e-12)
    n = 30000
    S = m.sample(n, random_state=1).to_numpy()
    ia = np.clip(np.searchsorted(edges[0], S[:, 0], side="left") - 1, 0, k - 1)
    ib = np.clip(np.searchsorted(edges[1], S[:, 1], side="left") - 1, 0, k - 1)
    obs = np.bincount(ia * k + ib, minlength=k * k)
    keep = probs > 0
    assert obs[~keep].sum() == 0
    assert stats.chisquare(obs[keep], probs[keep] * n).pvalue > 1e-3
    # every sample lies in a non-empty leaf: finite density
    assert np.isfinite(m.log_prob(S, floor=None)).all()


def test_floor_and_honest_minus_inf():
    X = np.random.default_rng(5).uniform(size=(100, 2))
    m = RFDE(n_trees=3, depth=5, random_state=0).fit(X)
    out = np.array([[2.0, 0.5], [0.5, 0.5]])
    lp = m.log_prob(out)
    # the floor is 1e-5 times the uniform density on the root box
    assert lp[0] == pytest.approx(math.log(1e-5) - np.log(m.box_hi_ - m.box_lo_).sum())
    assert np.isneginf(m.log_prob(out, floor=None)[0])
    assert m.log_prob(out, floor=None)[1] == pytest.approx(lp[1])
    m_honest = RFDE(n_trees=3, depth=5, density_floor=None, random_state=0).fit(X)
    assert np.isneginf(m_honest.log_prob(out)[0])
    assert np.array_equal(m.score_samples(out), lp)
    assert not np.isnan(m.log_prob(out, floor=None)).any()


def test_depth_selection():
    X = np.random.default_rng(6).beta(2, 5, size=(300, 2))
    m = RFDE(n_trees=4, depth="cv", depth_grid=range(1, 9), cv_trees=4, random_state=0).fit(X)
    assert set(m.cv_scores_) == set(range(1, 9))
    assert m.depth_ == min(m.cv_scores_, key=m.cv_scores_.get)
    assert 2 <= m.depth_ <= 8
    t = RFDE(n_trees=2, depth="theory", random_state=0).fit(X)
    assert t.depth_ == theory_depth(300, 2) == round(2 * math.log(300) / (1 + 2 * math.log(2)))


def test_save_load_roundtrip_and_determinism(tmp_path):
    rng = np.random.default_rng(7)
    df = pd.DataFrame({"x": rng.normal(size=200), "c": rng.choice(["u", "v", "w"], 200),
                       "k": rng.integers(0, 5, 200)})
    m = RFDE(n_trees=4, depth=6, random_state=11, n_jobs=1).fit(df)
    m2 = RFDE(n_trees=4, depth=6, random_state=11, n_jobs=2).fit(df)
    np.testing.assert_array_equal(m.leaf_log_weight_, m2.leaf_log_weight_)
    pd.testing.assert_frame_equal(m.sample(50, random_state=3), m2.sample(50, random_state=3))
    path = m.save(tmp_path / "rfde.forestgen")
    back = GenerativeForest.load(path)
    assert isinstance(back, RFDE) and back.depth_ == 6
    np.testing.assert_array_equal(back.log_prob(df, floor=None), m.log_prob(df, floor=None))
    pd.testing.assert_frame_equal(back.sample(20, random_state=0), m.sample(20, random_state=0))
    import pickle

    np.testing.assert_array_equal(pickle.loads(pickle.dumps(m)).log_prob(df), m.log_prob(df))


@pytest.mark.parametrize("kw,match", [
    ({"n_trees": 0}, "n_trees"), ({"depth": -1}, "depth"), ({"depth": "deep"}, "depth"),
    ({"depth": 99}, "depth"), ({"margin": -0.1}, "margin"), ({"density_floor": 0}, "floor"),
    ({"cv_folds": 1}, "cv_folds"), ({"depth_grid": [1, 70]}, "depth_grid"),
])
def test_bad_parameters(kw, match):
    with pytest.raises(ValueError, match=match):
        RFDE(**kw).fit(np.random.default_rng(0).normal(size=(20, 2)))


def test_fixed_box_must_contain_data():
    df = pd.DataFrame({"a": [0.1, 0.5, 2.0], "b": [0.0, 1.0, 0.5]})
    with pytest.raises(ValueError, match="'a'"):
        RFDE(depth=2, box={"a": (0.0, 1.0)}).fit(df)


def test_floor_is_relative_to_the_box_so_units_do_not_matter():
    """Natural units (issue 11): rescaling the data shifts log densities by -d log(scale) and
    leaves the CV depth unchanged; an absolute floor would flatten the model to depth 1."""
    rng = np.random.default_rng(7)
    X = rng.multivariate_normal([0, 0], [[1, 0.8], [0.8, 1]], size=400)
    scale = np.array([2500.0, 40000.0])  # dollars, grams
    kw = dict(n_trees=20, depth="cv", depth_grid=range(1, 13), cv_trees=10, random_state=0)
    unit = RFDE(**kw).fit(X)
    big = RFDE(**kw).fit(X * scale + 1e5)
    assert big.depth_ == unit.depth_ > 2
    q = X[:50]
    np.testing.assert_allclose(big.log_prob(q * scale + 1e5),
                               unit.log_prob(q) - np.log(scale).sum(), atol=1e-6)
    assert big.score(X * scale + 1e5) > unit.score(X) - np.log(scale).sum() - 1e-6


class _NotMidpoint(Splitter):
    """The midpoint partition behind a splitter RFDE cannot recognise: depth CV grows forests."""

    labelled = False

    def grow(self, data, y, w, rng, limits):
        return MidpointSplitter().grow(data, y, w, rng, limits)


def test_depth_cv_works_with_any_splitter():
    X = np.random.default_rng(6).beta(2, 5, size=(200, 2))
    kw = dict(n_trees=3, depth="cv", depth_grid=range(1, 6), cv_trees=3, random_state=0)
    ref = RFDE(**kw).fit(X)
    gen = RFDE(**kw, splitter=_NotMidpoint()).fit(X)  # the generic path: same trees, same scores
    assert set(gen.cv_scores_) == set(ref.cv_scores_)
    for p in ref.cv_scores_:
        assert gen.cv_scores_[p] == pytest.approx(ref.cv_scores_[p], rel=1e-9)
    assert gen.depth_ == ref.depth_
    np.testing.assert_allclose(gen.log_prob(X), ref.log_prob(X), rtol=1e-12)
