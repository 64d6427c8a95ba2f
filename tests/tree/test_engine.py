"""Tree engine: binning, the Numba Gini grower, routing, reach and leaf boxes."""

from __future__ import annotations

import numpy as np
import pytest

from forestgen.data.binning import Binner
from forestgen.ensemble.bagging import draw_weights
from forestgen.splitters import BinnedData, GiniSplitter, GrowLimits, resolve_max_features
from forestgen.tree.forest import grow_forest, tree_generators


def _grow(Z, y, nominal, n_levels, *, n_trees=4, seed=0, n_jobs=1, min_class=(0.0, 1.0),
          **kw):
    b = Binner.fit(Z, nominal, n_levels)
    data = BinnedData(b.transform(Z), b.n_bins, b.nominal, b.thresholds)
    rngs = tree_generators(np.random.SeedSequence(seed), n_trees)
    W = np.stack([draw_weights(len(Z), r) for r in rngs])
    split = {"min_gain": kw.pop("min_impurity_decrease")} if "min_impurity_decrease" in kw else {}
    limits = GrowLimits(n_classes=int(y.max()) + 1, min_class_leaf=np.asarray(min_class), **kw)
    f = grow_forest(GiniSplitter(**split), data, y, W, rngs, limits, n_jobs=n_jobs)
    return f, W


def _python_route(f, x):
    out = []
    for b in range(f.n_trees):
        node = f.node_offsets[b]
        while f.feature[node] >= 0:
            j = f.feature[node]
            v = x[j]
            if np.isnan(v):
                go = f.nan_left[node] == 1
            elif f.cat_off[node] >= 0:
                k = f.n_levels[j]
                c = int(v)
                if 0 <= c < k:
                    go = f.cat_left[f.cat_off[node] + c] == 1
                else:
                    go = f.nan_left[node] == 1
            else:
                go = v <= f.threshold[node]
            node = f.left[node] if go else f.right[node]
        out.append(f.node_leaf[node])
    return out


@pytest.fixture(scope="module")
def mixed():
    rng = np.random.default_rng(1)
    n = 1500
    Z = np.column_stack([rng.normal(size=n), rng.normal(size=n), rng.integers(0, 6, n)])
    Z = Z.astype(float)
    Z[rng.random(n) < 0.1, 0] = np.nan
    y = ((Z[:, 1] > 0.3) ^ np.isin(Z[:, 2], [1, 4])).astype(np.int64)
    return Z, y, np.array([False, False, True]), np.array([0, 0, 6])


def test_binner_codes_match_thresholds():
    rng = np.random.default_rng(0)
    z = rng.normal(size=(5000, 1))
    b = Binner.fit(z, np.array([False]), np.array([0]), max_bins=32)
    codes = b.transform(z)[0]
    assert b.n_bins[0] <= 32
    thr = b.thresholds[0]
    for c in range(len(thr)):  # code <= c  <=>  x <= thr[c]
        np.testing.assert_array_equal(codes <= c, z[:, 0] <= thr[c])
    z2 = z.copy()
    z2[0, 0] = np.nan
    assert b.transform(z2)[0, 0] == b.n_bins[0]


def test_binner_few_values_exact_midpoints():
    z = np.array([[1.0], [2.0], [2.0], [5.0]])
    b = Binner.fit(z, np.array([False]), np.array([0]))
    np.testing.assert_allclose(b.thresholds[0], [1.5, 3.5])


def test_apply_matches_python_traversal(mixed):
    Z, y, nominal, n_levels = mixed
    f, _ = _grow(Z, y, nominal, n_levels)
    leaves = f.apply(Z)
    for i in range(0, len(Z), 97):
        assert list(leaves[i]) == _python_route(f, Z[i])
    # every leaf id belongs to the tree it was returned for
    trees = np.broadcast_to(np.arange(f.n_trees), leaves.shape)
    np.testing.assert_array_equal(f.leaf_tree[leaves], trees)
    assert f.n_trees > 2
    np.testing.assert_array_equal(f.apply(Z, n_trees=2), leaves[:, :2])  # the first trees


def test_gini_learns_the_rule(mixed):
    Z, y, nominal, n_levels = mixed
    f, W = _grow(Z, y, nominal, n_levels, n_trees=1, max_features=None, min_class=(0.0, 0.0))
    # nominal subset split captures the {1, 4} interaction: training rows are nearly pure
    leaves = f.apply(Z)[:, 0]
    val = f.leaf_value
    pred = val[leaves].argmax(1)
    assert (pred == y).mean() > 0.97
    assert (f.cat_off >= 0).any(), "expected a nominal (level subset) split"


def test_boxes_contain_their_rows(mixed):
    Z, y, nominal, n_levels = mixed
    f, _ = _grow(Z, y, nominal, n_levels)
    boxes = f.boxes(3, n_levels)
    leaves = f.apply(Z)
    for b in range(f.n_trees):
        L = leaves[:, b]
        for j in (0, 1):
            v = Z[:, j]
            ok = np.isnan(v) | ((v > boxes.lower[L, j]) & (v <= boxes.upper[L, j]))
            assert ok.all()
        assert boxes.levels(2, 6)[L, Z[:, 2].astype(int)].all()


def test_reach_marginalises_nan(mixed):
    Z, y, nominal, n_levels = mixed
    f, _ = _grow(Z, y, nominal, n_levels)
    X = Z[:20].copy()
    X[np.isnan(X[:, 0]), 0] = 0.1
    ptr, leaves = f.reach(X)
    assert np.all(np.diff(ptr) == f.n_trees)  # complete rows: one leaf per tree
    np.testing.assert_array_equal(leaves.reshape(20, -1), f.apply(X))
    X[:, 1] = np.nan
    ptr, leaves = f.reach(X)
    # with x1 unknown, reached leaves are exactly those whose boxes admit the other entries
    boxes = f.boxes(3, n_levels)
    for i in range(5):
        got = set(leaves[ptr[i]:ptr[i + 1]])
        x0, c = X[i, 0], int(X[i, 2])
        ok = ((x0 > boxes.lower[:, 0]) & (x0 <= boxes.upper[:, 0])) if not np.isnan(x0) else True
        want = set(np.nonzero(ok & boxes.levels(2, 6)[:, c])[0])
        assert got == want


def test_min_class_leaf_enforced(mixed):
    Z, y, nominal, n_levels = mixed
    f, W = _grow(Z, y, nominal, n_levels, min_class=(0.0, 5.0))
    assert (f.leaf_value[:, 1] >= 5.0).all()
    f2, _ = _grow(Z, y, nominal, n_levels, min_class=(0.0, 1.0))
    assert f2.n_leaves > f.n_leaves


def test_max_depth_and_min_samples_leaf(mixed):
    Z, y, nominal, n_levels = mixed
    f, _ = _grow(Z, y, nominal, n_levels, max_depth=3)
    assert f.depth().max() <= 3
    f, _ = _grow(Z, y, nominal, n_levels, min_samples_leaf=40.0)
    assert (f.leaf_value.sum(1) >= 40.0).all()


def test_thread_count_independent(mixed):
    Z, y, nominal, n_levels = mixed
    f1, _ = _grow(Z, y, nominal, n_levels, n_trees=6, n_jobs=1)
    f2, _ = _grow(Z, y, nominal, n_levels, n_trees=6, n_jobs=2)
    for name in ("feature", "threshold", "left", "right", "cat_left", "nan_left"):
        np.testing.assert_array_equal(getattr(f1, name), getattr(f2, name))


def test_missing_goes_to_better_side():
    rng = np.random.default_rng(0)
    n = 1000
    x = rng.normal(size=n)
    y = (x > 0).astype(np.int64)
    x[(y == 1) & (rng.random(n) < 0.3)] = np.nan  # missing means "class 1"
    f, _ = _grow(x[:, None], y, np.array([False]), np.array([0]), n_trees=1, max_depth=1,
                 max_features=None, min_class=(0.0, 0.0))
    root = f.node_offsets[0]
    assert abs(f.threshold[root]) < 0.2
    assert f.nan_left[root] == 0  # right = the x > 0 side, where class 1 lives


def test_many_levels_nominal():
    rng = np.random.default_rng(0)
    n, k = 4000, 400
    c = rng.integers(0, k, n).astype(float)
    y = (c % 3 == 0).astype(np.int64)
    f, _ = _grow(c[:, None], y, np.array([True]), np.array([k]), n_trees=1, max_features=None,
                 min_class=(0.0, 0.0))
    pred = f.leaf_value[f.apply(c[:, None])[:, 0]].argmax(1)
    assert (pred == y).mean() > 0.95


def test_resolve_max_features():
    assert resolve_max_features("sqrt", 10) == 3
    assert resolve_max_features(None, 10) == 10
    assert resolve_max_features(0.5, 10) == 5
    assert resolve_max_features(4, 10) == 4
    with pytest.raises(ValueError, match="max_features"):
        resolve_max_features("bad", 10)
