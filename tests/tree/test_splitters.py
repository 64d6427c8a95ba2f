"""The tree pipeline: splitter= on every learner, criteria, user @njit gains, typed records."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest
from numba import njit

from forestgen.learners import ARF, DEF, RFDE, GeF
from forestgen.splitters import DensitySplitter, GiniSplitter, ImpuritySplitter
from forestgen.tree.record import path_cells


@njit(cache=True)
def my_gini(left, right):
    """Gini decrease written against the public gain signature."""
    WL = left.sum()
    WR = right.sum()
    W = WL + WR
    sL = (left * left).sum()
    sR = (right * right).sum()
    p = left + right
    return (W - (p * p).sum() / W) - (WL - sL / WL) - (WR - sR / WR)


@njit(cache=True)
def my_ise(left, right):
    PL, VL, PR, VR = left[0], left[1], right[0], right[1]
    return PL * PL / VL + PR * PR / VR - (PL + PR) ** 2 / (VL + VR)


@pytest.fixture(scope="module")
def table():
    rng = np.random.default_rng(0)
    n = 300
    x = rng.normal(size=n)
    c = np.where(x + rng.normal(size=n) > 0, "a", "b")
    k = rng.integers(0, 4, n)
    return pd.DataFrame({"x": x, "y": 2 * x + rng.normal(size=n), "k": k, "c": c})


def _same_forest(a, b):
    for f in ("feature", "threshold", "left", "right", "cat_left"):
        np.testing.assert_array_equal(getattr(a.forest_, f), getattr(b.forest_, f))


def test_user_njit_gini_grows_the_builtin_trees(table):
    kw = dict(n_trees=3, random_state=0, n_jobs=1, max_iters=1)
    a = ARF(**kw).fit(table)
    b = ARF(splitter=my_gini, **kw).fit(table)
    c = ARF(splitter=ImpuritySplitter(criterion=my_gini), **kw).fit(table)
    _same_forest(a, b)
    _same_forest(a, c)
    np.testing.assert_allclose(a.log_prob(table), b.log_prob(table), rtol=1e-12)


def test_splitter_by_name_class_instance(table):
    kw = dict(n_trees=2, random_state=0, n_jobs=1, max_iters=0)
    a = ARF(splitter="gini", **kw).fit(table)
    b = ARF(splitter=GiniSplitter, **kw).fit(table)
    c = ARF(splitter=GiniSplitter(), **kw).fit(table)
    _same_forest(a, b)
    _same_forest(a, c)
    e = ARF(splitter="entropy", **kw).fit(table)
    assert not np.array_equal(e.forest_.threshold, a.forest_.threshold)
    assert np.isfinite(e.log_prob(table)).all()


def test_wrong_kind_of_splitter_names_the_learner(table):
    with pytest.raises(ValueError, match="ARF: splitter DensitySplitter is unlabelled; ARF "
                                         "grows class-labelled trees"):
        ARF(splitter="density", n_trees=2)  # at construction
    with pytest.raises(ValueError, match="DEF grows unlabelled"):
        DEF(splitter="gini", n_trees=2)
    with pytest.raises(TypeError, match="criterion must be"):
        ARF(splitter=42, n_trees=2).fit(table)


class _NoWeights(ImpuritySplitter):
    """A splitter that omits the optional class weights."""

    def grow(self, data, y, w, rng, limits):
        return dataclasses.replace(super().grow(data, y, w, rng, limits), class_weight=None)


def test_arf_recounts_class_weights_a_splitter_omits(table):
    kw = dict(n_trees=3, random_state=1, n_jobs=1, max_iters=2, early_stop=False)
    a = ARF(**kw).fit(table)
    b = ARF(splitter=_NoWeights(), **kw).fit(table)
    assert b.forest_.node_value.size == 0
    assert [h["oob_accuracy"] for h in a.fit_diagnostics_] == \
        [h["oob_accuracy"] for h in b.fit_diagnostics_]
    np.testing.assert_allclose(a.log_prob(table), b.log_prob(table), rtol=1e-12)


def test_gef_takes_a_splitter(table):
    a = GeF(n_trees=3, random_state=0, n_jobs=1).fit(table, target="c")
    b = GeF(n_trees=3, random_state=0, n_jobs=1, splitter=my_gini).fit(table, target="c")
    _same_forest(a, b)


def test_def_user_gain_matches_builtin_ise(table):
    num = table[["x", "y"]]
    kw = dict(n_trees=3, max_leaves=16, random_state=0, n_jobs=1, criterion="ise")
    a = DEF(**kw).fit(num)
    b = DEF(splitter=my_ise, **kw).fit(num)
    c = DEF(splitter=DensitySplitter(criterion=my_ise), **kw).fit(num)
    _same_forest(a, b)
    _same_forest(a, c)


def test_rfde_forest_arrays_hold_the_exact_cells(table):
    m = RFDE(n_trees=4, depth=6, random_state=0, n_jobs=1).fit(table[["x", "y"]])
    f = m.forest_
    boxes = f.boxes(2, [0, 0])
    # the leaf models and ForestArrays agree on every leaf's cell
    np.testing.assert_array_equal(boxes.lower[:, 0], m.leaf_models_[0].lo_)
    np.testing.assert_array_equal(boxes.upper[:, 1], m.leaf_models_[1].hi_)
    # path compression makes cells strictly smaller than the root paths for many leaves
    lo = np.concatenate([path_cells(_tree(f, t), 2, [0, 0])[0]
                         for t in range(f.n_trees)])
    lo = np.maximum(lo, m.box_lo_)
    assert (boxes.lower > lo).any(axis=1).mean() > 0.1
    # each training row lies in the cell of the leaf it is routed to
    Z = m.encoder_.transform(table[["x", "y"]])
    leaf = f.apply(Z)
    for t in range(f.n_trees):
        lf = leaf[:, t]
        assert ((Z > boxes.lower[lf]) & (Z <= boxes.upper[lf])).all()


def _tree(f, t):
    from forestgen.tree.record import TreeRecord

    a, b = f.node_offsets[t], f.node_offsets[t + 1]
    sl = slice(a, b)
    return TreeRecord(feature=f.feature[sl], threshold=f.threshold[sl], nan_left=f.nan_left[sl],
                      left=np.where(f.left[sl] >= 0, f.left[sl] - a, -1).astype(np.int32),
                      right=np.where(f.right[sl] >= 0, f.right[sl] - a, -1).astype(np.int32),
                      cat_off=f.cat_off[sl], cat_left=f.cat_left)


def test_same_seed_same_forest_any_thread_count(table):
    for cls, kw in [(DEF, dict(max_leaves=16)), (RFDE, dict(depth=5))]:
        a = cls(n_trees=4, random_state=3, n_jobs=1, **kw).fit(table)
        b = cls(n_trees=4, random_state=3, n_jobs=2, **kw).fit(table)
        _same_forest(a, b)
