"""The rounded-normal tail of integer-level pmfs (issue 19): R arf's shape mixed into each
leaf's pmf with weight c / (N + c), exactly normalised over the levels the cell allows."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from forestgen import ARF
from forestgen.leaves.base import ColumnCell
from forestgen.leaves.ordinal_kernel import OrdinalKernelLeaf
from forestgen.leaves.rounded_normal import TAIL_ARRAYS, RoundedNormalTailLeaf
from forestgen.testing import check_leaf_model


def _data(seed=0, L=6, k=15, n=120):
    rng = np.random.default_rng(seed)
    leaf = rng.integers(0, L, n)
    x = np.clip(np.round(rng.normal(3 + leaf, 1.0)), 0, k - 1)
    x[:40] = 0.0  # leaf-wise point masses at 0
    x[rng.random(n) < 0.05] = np.nan
    allowed = np.ones((L, k), bool)
    allowed[1, 10:] = False  # an upper cell bound
    allowed[2, :2] = False  # a lower one
    allowed[3, 5] = False  # a hole (a nominal split)
    x[allowed[leaf, np.nan_to_num(x).astype(int)] == 0] = np.nan
    cell = ColumnCell(lower=np.full(L, -np.inf), upper=np.full(L, np.inf), allowed=allowed,
                      data_min=0.0, data_max=k - 1.0, n_levels=k)
    return x, leaf, cell


def test_leaf_contract_with_tail():
    """Normalisation, log_prob = probs, level sets, sampling frequencies, mean, save/load and
    the torch hooks (forestgen.testing's conformance check)."""
    check_leaf_model(RoundedNormalTailLeaf(tail=2.0, prior=0.3))


@pytest.mark.parametrize("c", [0.5, 5.0])
def test_pmf_is_the_documented_mixture(c):
    x, leaf, cell = _data()
    L, k = cell.allowed.shape
    plain = OrdinalKernelLeaf(prior=0.3).fit(x, leaf, cell)
    lm = RoundedNormalTailLeaf(prior=0.3, tail=c).fit(x, leaf, cell)
    p0, p = plain.probs(np.arange(L)), lm.probs(np.arange(L))
    np.testing.assert_allclose(p.sum(1), 1.0, atol=1e-12)
    assert not (p[~cell.allowed] > 0).any()
    codes = np.arange(k)
    for j in range(L):
        v = x[(leaf == j) & ~np.isnan(x)]
        n = v.size
        sd = np.sqrt(v.var(ddof=1) + 1 / 12)  # R's sd, plus the unit cells' 1/12
        q = stats.norm.cdf(codes + 0.5, v.mean(), sd) - stats.norm.cdf(codes - 0.5, v.mean(), sd)
        q = q * cell.allowed[j]
        w = c / (n + c)
        want = (1 - w) * p0[j] + w * q / q.sum()
        np.testing.assert_allclose(p[j], want, rtol=1e-9, atol=1e-14)
        seen = np.unique(v).astype(int)
        assert np.all(p[j, seen] >= (1 - w) * p0[j, seen] - 1e-15)  # seen values keep 1 - w


def test_unseen_neighbour_gets_a_real_share_and_point_mass_stays():
    """A 5-row leaf: the integer next to its values gets far more than the prior gives it;
    a 300-row leaf of zeros keeps almost all its mass on 0."""
    k = 40
    x = np.r_[[10, 11, 11, 12, 14], np.zeros(300), np.arange(k)].astype(float)
    leaf = np.r_[np.zeros(5), np.ones(300), np.full(k, 2)].astype(np.int64)
    cell = ColumnCell(lower=np.full(3, -np.inf), upper=np.full(3, np.inf), allowed=None,
                      data_min=0.0, data_max=k - 1.0, n_levels=k)
    plain = OrdinalKernelLeaf(prior=0.3).fit(x, leaf, cell).probs(np.arange(3))
    tail = RoundedNormalTailLeaf(prior=0.3, tail=10.0).fit(x, leaf, cell).probs(np.arange(3))
    assert tail[0, 13] > 20 * plain[0, 13] and tail[0, 13] > 0.05
    assert tail[0, 9] > 20 * plain[0, 9]
    assert tail[1, 0] > 0.99 and plain[1, 0] > 0.99


def test_sampling_matches_pmf_and_level_queries_match_grid_sums():
    x, leaf, cell = _data(1)
    L, k = cell.allowed.shape
    lm = RoundedNormalTailLeaf(prior=0.3, tail=3.0).fit(x, leaf, cell)
    p = lm.probs(np.arange(L))
    rng = np.random.default_rng(0)
    for j in range(L):
        s = lm.sample(np.full(20000, j), rng).astype(int)
        ok = p[j] > 1e-3
        obs = np.bincount(s, minlength=k)
        assert obs[~cell.allowed[j]].sum() == 0
        exp = np.r_[p[j, ok], p[j, ~ok].sum()] * s.size  # the rare levels pooled
        got = np.r_[obs[ok], obs[~ok].sum()]
        exp, got = exp[exp > 0], got[exp > 0]
        assert stats.chisquare(got, exp).pvalue > 1e-4, j
        np.testing.assert_allclose(lm.mean(np.array([j]))[0], p[j] @ np.arange(k), rtol=1e-12)
    levels = rng.random((50, k)) < 0.4
    lf = rng.integers(0, L, 50)
    np.testing.assert_allclose(np.exp(lm.log_prob_levels(lf, levels)),
                               (p[lf] * levels).sum(1), rtol=1e-12)
    np.testing.assert_allclose(np.exp(lm.log_prob(lf, np.full(50, 7.0))), p[lf, 7], rtol=1e-12)
    # a draw restricted to a level set follows the pmf renormalised on it
    sub = np.zeros(k, bool)
    sub[[2, 3, 4, 8]] = True
    s = lm.sample(np.full(20000, 0), rng, levels=sub).astype(int)
    assert set(np.unique(s)) <= {2, 3, 4, 8}
    want = p[0, [2, 3, 4, 8]] / p[0, [2, 3, 4, 8]].sum()
    assert stats.chisquare(np.bincount(s, minlength=k)[[2, 3, 4, 8]],
                           want * s.size).pvalue > 1e-4


def test_tail_zero_stores_nothing_new_and_arrays_round_trip():
    x, leaf, cell = _data(2)
    off = RoundedNormalTailLeaf(prior=0.3, tail=0.0).fit(x, leaf, cell)
    assert not set(TAIL_ARRAYS) & set(off.param_arrays())
    lm = RoundedNormalTailLeaf(prior=0.3, tail=1.0).fit(x, leaf, cell)
    arrays = lm.param_arrays()
    assert set(TAIL_ARRAYS) <= set(arrays)
    L, k = cell.allowed.shape
    lm.check_param_arrays(arrays, L, k)
    with pytest.raises(ValueError, match="tail_"):
        lm.check_param_arrays({n: v for n, v in arrays.items() if n != "tail_z_"}, L, k)
    bad = dict(arrays, tail_w_=np.full(L, 1.5))
    with pytest.raises(ValueError, match="tail_w_"):
        lm.check_param_arrays(bad, L, k)
    again = RoundedNormalTailLeaf(**lm.get_params()).set_param_arrays(arrays)
    np.testing.assert_array_equal(again.probs(np.arange(L)), lm.probs(np.arange(L)))
    with pytest.raises(ValueError, match="tail"):
        RoundedNormalTailLeaf(tail=-1.0).fit(x, leaf, cell)


@pytest.fixture(scope="module")
def ratings():
    rng = np.random.default_rng(0)
    n = 300
    z = rng.normal(size=n)
    return pd.DataFrame({"score": np.clip(np.round(40 + 12 * z + 4 * rng.normal(size=n)), 0,
                                          80).astype(np.int64),
                         "x": z + 0.3 * rng.normal(size=n)})


def test_arf_integer_tail_raises_heldout_likelihood_and_round_trips(ratings, tmp_path):
    train, test = ratings.iloc[:200], ratings.iloc[200:]
    plain = ARF(n_trees=10, min_node_size=5, random_state=0).fit(train)
    tail = ARF(n_trees=10, min_node_size=5, integer_tail=10, random_state=0).fit(train)
    # (held-out rows past the training range of x have density zero under both: the support
    # ends at the observed range; compare on the rows inside it)
    inside = test.x.between(train.x.min(), train.x.max()).to_numpy()
    assert inside.mean() > 0.9
    assert tail.log_prob(test)[inside].mean() > plain.log_prob(test)[inside].mean() + 0.1
    loaded = ARF.load(tail.save(tmp_path / "m.forestgen"))
    np.testing.assert_array_equal(loaded.log_prob(test), tail.log_prob(test))
    pd.testing.assert_frame_equal(loaded.sample(50, random_state=1),
                                  tail.sample(50, random_state=1))
    # the integer column's marginal sums to one over its levels (exact: the values 0-80
    # outside the training levels have probability zero, not density_floor's score)
    grid = pd.DataFrame({"score": np.arange(0, 81), "x": np.nan})
    exact = tail.log_prob(grid, floor=None)
    outside = ~grid.score.between(train.score.min(), train.score.max()).to_numpy()
    assert outside.any() and np.isneginf(exact[outside]).all()
    assert np.exp(exact).sum() == pytest.approx(1.0, abs=1e-9)


def test_arf_integer_tail_validated(ratings):
    for bad in (-1.0, np.inf, "x"):
        with pytest.raises(ValueError, match="integer_tail"):
            ARF(integer_tail=bad).fit(ratings)


def test_arf_with_integer_tail_answers_every_query():
    """Sampling, log_prob, NaN marginals, conditions, imputation, save/load and the torch
    layer (forestgen.testing's learner check) with the tail on an integer count column."""
    from forestgen.testing import check_learner

    check_learner(ARF(n_trees=5, integer_tail=10, random_state=0), tables=["mixed"])


def test_arf_gives_the_tail_only_to_unit_grid_integer_columns():
    """A dense integer scale gets the tail; a spiky column coded as its observed values
    (0, 114, 401, ...: no unit grid) keeps its plain pmf."""
    rng = np.random.default_rng(0)
    n = 400
    df = pd.DataFrame({"rating": rng.integers(1, 11, n),
                       "gain": np.where(rng.random(n) < 0.8, 0,
                                        rng.choice([114, 401, 594, 914, 991], n)),
                       "x": rng.normal(size=n)})
    # the paper's model (no back-off tree, whose columns would be stacked leaves)
    m = ARF(n_trees=3, integer_tail=10, marginal_weight=0, random_state=0).fit(df)
    kinds = {s.name: (s.kind, len(s.categories or [])) for s in m.encoder_.schema}
    assert kinds["rating"] == ("integer", 10) and kinds["gain"] == ("integer", 6)
    rating, gain = m.leaf_models_[0], m.leaf_models_[1]
    assert type(rating) is RoundedNormalTailLeaf and type(gain) is OrdinalKernelLeaf
    assert set(TAIL_ARRAYS) <= set(rating.param_arrays())
    # off (the default): the plain ordinal-kernel leaf, which the bounded conditional leaf
    # search evaluates in its kernels
    from forestgen.inference.leaf_search import leaf_kind

    plain = ARF(n_trees=3, marginal_weight=0, random_state=0).fit(df)
    assert type(plain.leaf_models_[0]) is OrdinalKernelLeaf and leaf_kind(plain.leaf_models_[0])
