"""DEF (Bravo 2025, App. B; Ram & Gray 2011): exact normalisation, ISE/KL gain identities,
exact sampling, persistence, determinism, parameter errors (spec nrgboost_def.md §10 T2-T5)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from forestgen import DEF, GenerativeForest
from forestgen.tree.criteria import ISE, KL, criterion_gain


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


@pytest.mark.parametrize("d", [1, 2, 3])
@pytest.mark.parametrize("criterion", ["ise", "kl"])
def test_integrates_to_one(d, criterion):
    X = np.random.default_rng(d).beta(2, 5, size=(300, d))
    m = DEF(n_trees=4, max_leaves=12, criterion=criterion, max_bins=16, random_state=0).fit(X)
    assert exact_box_mass(m) == pytest.approx(1.0, abs=1e-12)
    # a grid much finer than any leaf: the Riemann sum converges to the exact integral
    approx = grid_integral(m, {1: 4096, 2: 256, 3: 48}[d])
    assert approx == pytest.approx(1.0, abs={1: 2e-3, 2: 2e-2, 3: 6e-2}[d])


def test_integrates_to_one_with_categorical():
    rng = np.random.default_rng(0)
    c = rng.choice(list("abcd"), 500, p=[0.6, 0.2, 0.15, 0.05])
    x = rng.normal(size=500) + (c == "a") * 3
    df = pd.DataFrame({"x": x, "c": c, "b": rng.random(500) < 0.3})
    m = DEF(n_trees=5, max_leaves=16, random_state=1).fit(df)
    assert exact_box_mass(m) == pytest.approx(1.0, abs=1e-12)
    # the level split is found: level masses of the model follow the data's
    schema = m.encoder_.schema
    for k, lev in enumerate(schema["c"].categories):
        mask = np.zeros(4, bool)
        mask[k] = True
        assert exact_box_mass(m, levels={1: mask}) == pytest.approx(np.mean(c == lev), abs=0.06)
    # total over levels of the numeric integral
    lo, hi = m.box_lo_[0], m.box_hi_[0]
    xs = lo + (hi - lo) * (np.arange(4000) + 0.5) / 4000
    tot = 0.0
    for lev in schema["c"].categories:
        for b in (False, True):
            rows = pd.DataFrame({"x": xs, "c": lev, "b": b})
            tot += np.exp(m.log_prob(rows, floor=None)).mean() * (hi - lo)
    assert tot == pytest.approx(1.0, abs=5e-3)


@pytest.mark.parametrize("criterion", ["ise", "kl"])
def test_first_split_maximises_gain_and_gain_identities(criterion):
    # tiny 1-D data, one tree, no bootstrap, 2 leaves: the split must be the argmax of the
    # direct gain over all candidate thresholds, and the gain must equal the change of the
    # training log-likelihood (KL) / of the ISE objective int q^2 - 2 mean q(x_i) (ISE)
    x = np.array([0.0, 0.1, 0.15, 0.2, 0.22, 0.5, 0.9, 1.0])
    m = DEF(n_trees=1, max_leaves=2, bootstrap=False, criterion=criterion,
            min_samples_leaf=1, smoothing=0, random_state=0).fit(x[:, None])
    lo, hi = m.box_lo_[0], m.box_hi_[0]
    u = np.unique(x)
    best, best_t = -np.inf, None
    for t in (u[:-1] + u[1:]) / 2:
        PL = np.mean(x <= t)
        VL = (t - lo) / (hi - lo)
        if criterion == "ise":
            g = PL**2 / VL + (1 - PL) ** 2 / (1 - VL) - 1.0
        else:
            g = PL * math.log(PL / VL) + (1 - PL) * math.log((1 - PL) / (1 - VL))
        code = ISE if criterion == "ise" else KL
        assert criterion_gain(code, np.array([PL, VL]), np.array([1 - PL, 1 - VL])) == \
            pytest.approx(g, rel=1e-12)
        if g > best:
            best, best_t = g, t
    assert m.forest_.threshold[0] == pytest.approx(best_t)
    vol = hi - lo
    q = np.exp(m.log_prob(x[:, None], floor=None))
    if criterion == "kl":
        assert np.mean(np.log(q)) - math.log(1 / vol) == pytest.approx(best, rel=1e-9)
    else:
        leaf = np.arange(m.forest_.n_leaves)
        w = np.exp(m.leaf_log_weight_)
        width = m.leaf_models_[0].hi_[leaf] - m.leaf_models_[0].lo_[leaf]
        int_q2 = np.sum(w**2 / width)
        ise_after = int_q2 - 2 * q.mean()
        ise_before = 1 / vol - 2 / vol
        assert (ise_before - ise_after) * vol == pytest.approx(best, rel=1e-9)


def test_single_tree_without_bootstrap_fits_training_masses():
    X = np.random.default_rng(2).normal(size=(400, 2))
    m = DEF(n_trees=1, max_leaves=20, bootstrap=False, smoothing=0, marginal_weight=0,
            cell_shape="uniform",
            random_state=0).fit(X)
    leaves = m.forest_.apply(X)[:, 0]
    frac = np.bincount(leaves, minlength=m.forest_.n_leaves) / len(X)
    np.testing.assert_allclose(np.exp(m.leaf_log_weight_), frac, atol=1e-12)
    assert m.forest_.n_leaves == 20
    assert np.isfinite(m.log_prob(X, floor=None)).all()


def test_sampler_matches_density_chi_square():
    X = np.random.default_rng(4).beta(2, 4, size=(500, 2))
    m = DEF(n_trees=6, max_leaves=24, random_state=0).fit(X)
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


def test_max_features_and_min_samples_leaf_respected():
    X = np.random.default_rng(5).normal(size=(300, 4))
    m = DEF(n_trees=3, max_leaves=64, min_samples_leaf=10, max_features=0.5, bootstrap=False,
            random_state=0).fit(X)
    cnt = np.bincount(m.forest_.apply(X).ravel(), minlength=m.forest_.n_leaves)
    assert cnt.min() >= 10


def test_save_load_roundtrip_and_determinism(tmp_path):
    rng = np.random.default_rng(7)
    df = pd.DataFrame({"x": rng.normal(size=200), "c": rng.choice(["u", "v", "w"], 200),
                       "k": rng.integers(0, 5, 200)})
    m = DEF(n_trees=4, max_leaves=16, random_state=11, n_jobs=1).fit(df)
    m2 = DEF(n_trees=4, max_leaves=16, random_state=11, n_jobs=2).fit(df)
    np.testing.assert_array_equal(m.leaf_log_weight_, m2.leaf_log_weight_)
    pd.testing.assert_frame_equal(m.sample(50, random_state=3), m2.sample(50, random_state=3))
    back = GenerativeForest.load(m.save(tmp_path / "def.forestgen"))
    assert isinstance(back, DEF)
    np.testing.assert_array_equal(back.log_prob(df), m.log_prob(df))
    pd.testing.assert_frame_equal(back.sample(20, random_state=0), m.sample(20, random_state=0))
    other = DEF(n_trees=4, max_leaves=16, random_state=12).fit(df)
    assert not np.array_equal(other.log_prob(df), m.log_prob(df))


@pytest.mark.parametrize("kw,match", [
    ({"n_trees": 0}, "n_trees"), ({"criterion": "gini"}, "criterion"),
    ({"max_leaves": 0}, "max_leaves"), ({"min_samples_leaf": -1}, "min_samples_leaf"),
    ({"max_features": 1.5}, "max_features"), ({"reference": "foo"}, "reference"),
    ({"density_floor": -1.0}, "density_floor"), ({"max_bins": 1}, "max_bins"),
])
def test_bad_parameters(kw, match):
    with pytest.raises(ValueError, match=match):
        DEF(**kw).fit(np.random.default_rng(0).normal(size=(20, 2)))
