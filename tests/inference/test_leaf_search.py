"""The bounded leaf search (issue 15) draws exactly from the enumerated leaf posterior."""

from __future__ import annotations

import numba
import numpy as np
import pandas as pd
import pytest
from scipy import stats

from forestgen.families.mixture.arf import ARF
from forestgen.inference import leaf_search
from forestgen.inference.conditions import evidence_from_frame
from forestgen.inference.leaf_search import bounded_draws, draw_leaves_bounded, node_bounds
from forestgen.inference.posterior import iter_posterior


def _table(n, seed=0):
    rng = np.random.default_rng(seed)
    z = rng.standard_normal((n, 2))
    cat = rng.integers(0, 4, n)
    return pd.DataFrame({"x0": z[:, 0] + 0.5 * cat, "x1": np.exp(0.4 * z[:, 1]) + 0.3 * z[:, 0],
                         "x2": rng.gamma(2.0, 1.0, n), "c0": np.array(list("abcd"))[cat],
                         "c1": np.where(z[:, 1] > 0, "hi", "lo"),
                         "i0": rng.integers(0, 4, n) + (z[:, 0] > 0)})


@pytest.fixture(scope="module")
def model():
    return ARF(n_trees=4, random_state=0, n_jobs=1).fit(_table(800))


@pytest.fixture(scope="module")
def unif_model():
    return ARF(n_trees=3, family="unif", random_state=1, n_jobs=1).fit(_table(500))


def _posterior(m, ev, row):
    ch = next(iter_posterior(m, ev.take(np.array([row]))))
    return ch.leaf, ch.weights()


def _chi2_p(leaf_draws, leaves, w):
    pos = {int(k): i for i, k in enumerate(leaves)}
    assert all(int(k) in pos for k in leaf_draws)  # every draw is a consistent leaf
    cnt = np.bincount([pos[int(k)] for k in leaf_draws], minlength=len(leaves))
    assert cnt[w == 0].sum() == 0  # never a leaf of zero posterior weight
    exp = w * len(leaf_draws)
    big = exp >= 5
    obs = np.r_[cnt[big], cnt[~big].sum()]
    ex = np.r_[exp[big], exp[~big].sum()]
    keep = ex > 0
    return stats.chisquare(obs[keep], ex[keep]).pvalue


@pytest.mark.parametrize("cols", [["x0", "c0"], ["x0", "x1", "c1"], ["c0", "c1"], ["x2"],
                                  ["i0", "x1"]])
def test_draws_follow_enumerated_posterior(model, cols):
    ev = evidence_from_frame(model, _table(3, seed=5)[cols])
    n = 6000
    for row in range(2):
        leaves, w = _posterior(model, ev, row)
        pts = np.repeat(ev.point[row:row + 1], n, axis=0)
        leaf, visits = draw_leaves_bounded(model, pts, np.arange(n), key=11, budget=20000)
        assert (leaf >= 0).all() and (visits >= 0).all()
        assert _chi2_p(leaf, leaves, w) > 1e-3


def test_uniform_leaves(unif_model):
    ev = evidence_from_frame(unif_model, _table(2, seed=6)[["x0", "x2", "c0"]])
    leaves, w = _posterior(unif_model, ev, 0)
    pts = np.repeat(ev.point[:1], 5000, axis=0)
    leaf, _ = draw_leaves_bounded(unif_model, pts, np.arange(5000), key=3, budget=20000)
    assert _chi2_p(leaf, leaves, w) > 1e-3


def test_node_bounds_bound_every_subtree(model):
    """Each internal node's stored bound is at least its children's (their sum at a free split,
    their max at a split on a given column) and at least the subtree's exact posterior weight
    for any evidence of that pattern; memory as documented in docs/scale.md."""
    nb = node_bounds(model)
    f = model.forest_
    given = [0, 3]  # x0 (truncated normal) and c0 (categorical)
    U = nb.pattern(given).astype(float)
    inner = f.feature >= 0
    val = np.empty(len(f.feature))
    val[inner] = U[nb.inner[inner]]
    sup = leaf_search.log_sup_density(model.leaf_models_[0])
    leaf_nodes = np.flatnonzero(~inner)
    k = f.node_leaf[leaf_nodes]
    val[leaf_nodes] = model.leaf_log_weight_[k] + sup[k]
    n = np.flatnonzero(inner)
    lft, rgt = val[f.left[n]], val[f.right[n]]
    split_given = np.isin(f.feature[n], given)
    assert (val[n][split_given] >= np.maximum(lft, rgt)[split_given]).all()
    free = ~split_given
    assert (np.exp(val[n][free]) >= np.exp(lft[free]) + np.exp(rgt[free])).all()
    # against the exact weights of every consistent leaf, summed bottom-up
    ev = evidence_from_frame(model, _table(4, seed=12)[["x0", "c0"]])
    order = leaf_search._bfs_order(f.feature, f.left, f.right, f.roots)
    node_of_leaf = np.empty(f.n_leaves, np.int64)
    node_of_leaf[k] = leaf_nodes
    for row in range(ev.m):
        ch = next(iter_posterior(model, ev.take(np.array([row]))))
        tot = np.zeros(len(f.feature))
        tot[node_of_leaf[ch.leaf]] = np.exp(ch.logw)
        for q in order[::-1]:
            if f.feature[q] >= 0:
                tot[q] = tot[f.left[q]] + tot[f.right[q]]
        assert (tot[n] <= np.exp(val[n]) * (1 + 1e-12)).all()
    assert nb.pattern(given).dtype == np.float32
    assert nb.nbytes == 4 * len(f.feature) + 4 * int(inner.sum()) * len(nb.patterns)
    assert int(inner.sum()) == f.n_leaves - f.n_trees
    for cols in ([0], [1], [2], [0, 1], [4]):
        nb.pattern(cols)
    assert len(nb.patterns) == leaf_search.PATTERNS_KEPT


def test_same_draws_at_any_thread_count_and_batching(model):
    ev = evidence_from_frame(model, _table(40, seed=7)[["x0", "c0"]])
    rows = np.arange(ev.m)
    full, _ = draw_leaves_bounded(model, ev.point, rows, key=99, budget=20000)
    part, _ = draw_leaves_bounded(model, ev.point[10:20], rows[10:20], key=99, budget=20000)
    assert np.array_equal(full[10:20], part)
    old = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        one = model.sample(conditions=_table(40, seed=7)[["x0", "c0"]], random_state=4)
        numba.set_num_threads(min(2, numba.config.NUMBA_NUM_THREADS))
        two = model.sample(conditions=_table(40, seed=7)[["x0", "c0"]], random_state=4)
    finally:
        numba.set_num_threads(old)
    pd.testing.assert_frame_equal(one, two)
    other, _ = draw_leaves_bounded(model, ev.point, rows, key=100, budget=20000)
    assert not np.array_equal(full, other)  # the key seeds the draws


def test_small_budget_and_impossible_evidence_fall_back(model):
    ev = evidence_from_frame(model, _table(5, seed=8)[["x0", "c0"]])
    leaf, visits = draw_leaves_bounded(model, ev.point, np.arange(5), key=1, budget=1)
    # a started trial always completes (cutting it short would favour shallow leaves)
    assert (leaf == -1).any() and (visits <= 1 + node_bounds(model).max_depth).all()
    far = pd.DataFrame({"x0": [1e6], "c0": ["a"]})  # outside every leaf's cell
    ev2 = evidence_from_frame(model, far)
    assert draw_leaves_bounded(model, ev2.point, np.arange(1), key=1)[0][0] == -1


def test_leaf_models_without_an_evaluator_are_left_to_the_walk():
    m = ARF(n_trees=2, integer_tail=10, random_state=0, n_jobs=1).fit(_table(300))
    j = m.encoder_.schema.names.index("i0")
    assert type(m.leaf_models_[j]).__name__ == "RoundedNormalTailLeaf"
    assert leaf_search.leaf_kind(m.leaf_models_[j]) == 0  # its rounded-normal tail
    ev = evidence_from_frame(m, _table(3, seed=2)[["i0", "x0"]])
    assert not leaf_search.bounded_eligible(m, ev, np.arange(3)).any()
    s = m.sample(conditions=_table(3, seed=2)[["i0", "x0"]], random_state=0)
    assert (s["i0"].to_numpy() == _table(3, seed=2)["i0"].to_numpy()).all()


def test_interval_and_level_set_evidence_is_searched(model):
    cond = pd.DataFrame({"x0": [0.3, (0.0, 1.0)], "c0": ["a", {"b", "c"}]}, dtype=object)
    ev = evidence_from_frame(model, cond)
    assert leaf_search.bounded_eligible(model, ev, np.arange(2)).tolist() == [True, True]
    leaf, info = bounded_draws(model, ev, np.arange(2), key=5)
    assert (leaf >= 0).all() and info["rows"] == 2


def test_conditional_sample_keeps_the_evidence(model):
    cond = _table(400, seed=9)[["x0", "c0"]]
    s = model.sample(conditions=cond, random_state=0)
    assert (s["x0"].to_numpy() == cond["x0"].to_numpy()).all()
    assert (s["c0"].astype(str).to_numpy() == cond["c0"].to_numpy()).all()
    # the free column's draws average to the mean of the exact conditional means
    mean = model.expect(columns="x1", conditions=cond).to_numpy(float)
    err = s["x1"].to_numpy() - mean
    assert abs(err.mean()) < 4 * err.std() / np.sqrt(len(err))
