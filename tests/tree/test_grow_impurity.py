"""The impurity grower's fast paths give the trees and answers of the plain ones (issue 33)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest
from numba import njit

from forestgen.data.binning import Binner
from forestgen.ensemble.bagging import draw_weights
from forestgen.families.mixture.arf import leafwise_donors, narrow_codes, stack_codes
from forestgen.learners import ARF
from forestgen.splitters import GiniSplitter, GrowLimits, TreeData
from forestgen.tree.criteria import ENTROPY, GINI, USER, criterion_gain
from forestgen.tree.forest import grow_forest_routed, tree_generators
from forestgen.tree.grow_impurity import (
    SPARSE_RATIO,
    LabelledRows,
    bin_thresholds,
    grow_rule,
    grow_tree,
    grow_tree_with,
)


def _table(n=600, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=n)
    Z = np.column_stack([
        x, x + rng.normal(size=n),  # many distinct values: 255 bins
        rng.integers(0, 7, n).astype(float),  # nominal, 7 levels
        np.round(rng.normal(size=n), 1),  # ties
        rng.integers(0, 300, n).astype(float)])  # nominal with more levels than uint8
    Z[rng.random(n) < 0.1, 1] = np.nan
    Z[rng.random(n) < 0.1, 2] = np.nan
    nominal = np.array([False, False, True, False, True])
    n_levels = np.array([0, 0, 7, 0, 300])
    y = (x + 0.5 * rng.normal(size=n) > 0).astype(np.int64)
    return Z, y, nominal, n_levels


def _grow(Xb, b, y, w, seed, sparse_ratio, route_all=True, min_class=(0.0, 1.0), mtry=2):
    rng = np.random.Generator(np.random.PCG64(seed))
    rows = LabelledRows(Xb, b.n_bins.astype(np.int64), b.nominal, y, w)
    return grow_tree(rows, grow_rule(2, -1, 1.0, min_class, mtry, 0.0, 0, sparse_ratio), rng,
                     route_all)


@pytest.mark.parametrize("weights", ["bootstrap", "fractional"])
def test_sparse_histograms_grow_the_dense_tree(weights):
    Z, y, nominal, n_levels = _table()
    b = Binner.fit(Z, nominal, n_levels)
    Xb = b.transform(Z)
    rng = np.random.default_rng(1)
    for seed in range(4):
        w = draw_weights(len(Z), rng)
        if weights == "fractional":
            w = w * rng.uniform(0.5, 1.5, len(Z))
        dense = _grow(Xb, b, y, w, seed, 0.0)
        sparse = _grow(Xb, b, y, w, seed, SPARSE_RATIO)
        wide = _grow(Xb, b, y, w, seed, 1e9)  # every node sparse
        assert len(dense[0]) > 30  # a real tree
        for a, s, v in zip(dense, sparse, wide):
            np.testing.assert_array_equal(a, s)
            np.testing.assert_array_equal(a, v)


@pytest.mark.parametrize("wide", [False, True])
def test_row_node_is_where_apply_sends_every_row(wide):
    """``wide``: 15 columns, so an out-of-bag record (codes and row id) takes three 8-byte
    words instead of two."""
    Z, y, nominal, n_levels = _table(seed=2)
    if wide:
        Z = np.hstack([Z, Z, Z])
        nominal, n_levels = np.tile(nominal, 3), np.tile(n_levels, 3)
    b = Binner.fit(Z, nominal, n_levels)
    data = TreeData(b.transform(Z), b.n_bins, b.nominal, b.thresholds, route_rows=True)
    rngs = tree_generators(np.random.SeedSequence(5), 4)
    W = np.stack([draw_weights(len(Z), r) for r in rngs])
    limits = GrowLimits(n_classes=2, min_class_leaf=np.array([0.0, 2.0]))
    forest, leaves = grow_forest_routed(GiniSplitter(), data, y, W, rngs, limits, n_jobs=1)
    assert (W == 0).any(axis=1).all()  # out-of-bag rows are routed too
    np.testing.assert_array_equal(leaves, forest.apply(Z))
    assert leaves.T.flags.c_contiguous  # tree-major: each tree's leaves one row in memory
    # uint8 codes where they fit grow the same forest
    narrow = narrow_codes(b.transform(Z[:, :4]))
    assert narrow.dtype == np.uint8 and narrow_codes(data.Xb).dtype == np.uint16
    b4 = Binner.fit(Z[:, :4], nominal[:4], n_levels[:4])
    f16, _ = grow_forest_routed(GiniSplitter(), TreeData(b4.transform(Z[:, :4]), b4.n_bins,
                                b4.nominal, b4.thresholds), y, W, rngs_again(5, 4), limits,
                                n_jobs=1)
    f8, _ = grow_forest_routed(GiniSplitter(), TreeData(narrow, b4.n_bins, b4.nominal,
                               b4.thresholds), y, W, rngs_again(5, 4), limits, n_jobs=1)
    for f in ("feature", "threshold", "left", "right", "cat_left", "node_value"):
        np.testing.assert_array_equal(getattr(f16, f), getattr(f8, f))


def test_more_classes_than_uint8_codes_hold():
    """The grower keeps each row's class label in a code slot: with 300 classes and uint8
    codes the splitter widens the codes (same forest as uint16 codes) and the bare kernel
    refuses, naming the problem."""
    Z, _, nominal, n_levels = _table(seed=4)
    b4 = Binner.fit(Z[:, :4], nominal[:4], n_levels[:4])
    narrow = narrow_codes(b4.transform(Z[:, :4]))
    assert narrow.dtype == np.uint8
    y = np.random.default_rng(0).integers(0, 300, len(Z))
    limits = GrowLimits(n_classes=300)
    W = np.ones((2, len(Z)))
    forests = [grow_forest_routed(GiniSplitter(), TreeData(codes, b4.n_bins, b4.nominal,
                                                           b4.thresholds), y, W,
                                  tree_generators(np.random.SeedSequence(1), 2), limits,
                                  n_jobs=1)[0]
               for codes in (narrow, narrow.astype(np.uint16))]
    assert forests[0].n_leaves > 10
    for f in ("feature", "threshold", "left", "right", "node_value"):
        np.testing.assert_array_equal(getattr(forests[0], f), getattr(forests[1], f))
    with pytest.raises(ValueError, match="more classes than the code dtype holds"):
        grow_tree(LabelledRows(narrow.copy(), b4.n_bins.astype(np.int64), b4.nominal, y, W[0]),
                  grow_rule(300, -1, 1.0, np.zeros(300), 2, 0.0, 0),
                  np.random.default_rng(0), False)


def rngs_again(seed, n):
    rngs = tree_generators(np.random.SeedSequence(seed), n)
    for r in rngs:  # the weights above were drawn from these streams first
        draw_weights(600, r)
    return rngs


def test_stack_codes_bins_the_stacked_values():
    Z, _, nominal, n_levels = _table(seed=3)
    b = Binner.fit(Z, nominal, n_levels)
    donors = np.random.default_rng(0).integers(0, len(Z), size=Z.shape)
    synth = Z[donors, np.arange(Z.shape[1])]
    np.testing.assert_array_equal(stack_codes(b.transform(Z), donors),
                                  b.transform(np.vstack([Z, synth])))


@pytest.mark.parametrize("tree_major", [False, True])
def test_leafwise_donors_match_a_stable_argsort(tree_major):
    rng = np.random.default_rng(0)
    n, B, L = 500, 6, 90
    leaves = np.sort(rng.integers(0, L, size=(n, B)), axis=1).astype(np.int32)
    if tree_major:  # (a forest's leaves: the transpose of a C-ordered [B, n])
        leaves = np.ascontiguousarray(leaves.T).T
    got = leafwise_donors(leaves, L, 3, np.random.default_rng(7))
    # the rule written out: (row, tree) pairs by leaf in a stable order
    flat = leaves.ravel()
    order = np.argsort(flat, kind="stable")
    counts = np.bincount(flat, minlength=L)
    starts = np.r_[0, np.cumsum(counts)[:-1]]
    r = np.random.default_rng(7)
    pick = flat[r.integers(0, n * B, size=n)]
    for j in range(3):
        pos = starts[pick] + (r.random(n) * counts[pick]).astype(np.int64)
        np.testing.assert_array_equal(got[:, j], order[pos] // B)
        assert (leaves[got[:, j]] == pick[:, None]).any(axis=1).all()  # a row of that leaf


@pytest.mark.parametrize("tree_major", [False, True])
@pytest.mark.parametrize("n", [300, 3000])
def test_members_by_tree_equal_one_sort_of_all_pairs(tree_major, n):
    """A forest's leaves (each tree's ids a block above the previous tree's; some ids
    reached by no row): the per-tree counting sort (serial twin at 300 rows, parallel kernel
    at 3000) lists the members, counts and starts of one stable sort of all pairs."""
    from forestgen.families.mixture.arf import _leaf_members, _members_by_tree
    from forestgen.parallel import sized

    rng = np.random.default_rng(n)
    B = 30
    sizes = rng.integers(1, 40, size=B)
    off = np.r_[0, np.cumsum(sizes + 2)]  # (two ids per tree that no row reaches)
    L = int(off[-1]) + 3
    leaves = np.stack([off[b] + rng.integers(0, sizes[b], n) for b in range(B)],
                      axis=1).astype(np.int32)
    if tree_major:
        leaves = np.ascontiguousarray(leaves.T).T
    got = np.empty(n * B, np.int32)
    counts, starts, done = sized(_members_by_tree, n * B)(leaves, L, got)
    assert done
    want = np.empty(n * B, np.int32)
    c2, s2 = _leaf_members(leaves, L, want)
    np.testing.assert_array_equal(counts, c2)
    np.testing.assert_array_equal(starts, s2)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(want, np.argsort(leaves.ravel(), kind="stable") // B)
    mixed = leaves.copy()
    mixed[0, 0] = off[1]  # a row of tree 0 in tree 1's range: interleaved, not done
    assert not _members_by_tree(mixed, L, got)[2]


class _NoRoutes(GiniSplitter):
    """A splitter that does not give ``row_node``: ARF routes the rows itself."""

    def grow(self, data, y, w, rng, limits):
        return dataclasses.replace(super().grow(data, y, w, rng, limits), row_node=None)


@pytest.mark.parametrize("oob_mode", ["hard", "soft"])
def test_arf_routed_rounds_equal_the_apply_path(oob_mode):
    rng = np.random.default_rng(4)
    n = 400
    x = rng.normal(size=n)
    df = pd.DataFrame({"x": x, "y": x ** 2 + rng.normal(size=n),
                       "c": pd.Categorical(np.where(x > 0, "a", "b")),
                       "k": rng.integers(0, 5, n)})
    df.loc[rng.random(n) < 0.1, "y"] = np.nan
    kw = dict(n_trees=4, random_state=2, n_jobs=1, max_iters=3, early_stop=False,
              oob_mode=oob_mode, delta=0.0)
    a = ARF(**kw).fit(df)
    b = ARF(splitter=_NoRoutes(), **kw).fit(df)
    assert a.n_rounds_ >= 2
    assert [h["oob_accuracy"] for h in a.fit_diagnostics_] == \
        [h["oob_accuracy"] for h in b.fit_diagnostics_]
    for f in ("feature", "threshold", "left", "right", "cat_left"):
        np.testing.assert_array_equal(getattr(a.forest_, f), getattr(b.forest_, f))
    np.testing.assert_array_equal(a.log_prob(df), b.log_prob(df))
    np.testing.assert_array_equal(a.sample_encoded(50, random_state=0),
                                  b.sample_encoded(50, random_state=0))


def test_arf_same_bits_any_thread_count():
    rng = np.random.default_rng(5)
    n = 500
    x = rng.normal(size=n)
    df = pd.DataFrame({"x": x, "y": np.sin(3 * x) + 0.3 * rng.normal(size=n),
                       "c": pd.Categorical(rng.integers(0, 4, n).astype(str))})
    kw = dict(n_trees=5, random_state=9, max_iters=2, early_stop=False)
    a = ARF(n_jobs=1, **kw).fit(df)
    b = ARF(n_jobs=2, **kw).fit(df)
    assert a.fit_diagnostics_[0]["oob_accuracy"] == b.fit_diagnostics_[0]["oob_accuracy"]
    for f in ("feature", "threshold", "left", "right", "cat_left", "node_value"):
        np.testing.assert_array_equal(getattr(a.forest_, f), getattr(b.forest_, f))
    np.testing.assert_array_equal(a.log_prob(df), b.log_prob(df))


@njit(cache=True)
def _builtin_gini(left, right):
    return criterion_gain(GINI, left, right)


@njit(cache=True)
def _builtin_entropy(left, right):
    return criterion_gain(ENTROPY, left, right)


@pytest.mark.parametrize("code, user", [(GINI, _builtin_gini), (ENTROPY, _builtin_entropy)])
def test_two_class_scan_equals_the_generic_scan(code, user):
    """Two classes under a built-in criterion take a scalar scan; the generic scan (what a
    user gain runs) with the built-in gain grows the same tree."""
    Z, y, nominal, n_levels = _table(seed=6)
    b = Binner.fit(Z, nominal, n_levels)
    Xb = b.transform(Z)
    generic = grow_tree_with(user)
    for seed in range(3):
        w = draw_weights(len(Z), np.random.default_rng(seed))
        rows = LabelledRows(Xb, b.n_bins.astype(np.int64), b.nominal, y, w)
        limits = (2, -1, 1.0, [0.0, 1.0], 2, 0.0)
        fast = grow_tree(rows, grow_rule(*limits, code),
                         np.random.Generator(np.random.PCG64(seed)), True)
        slow = generic(rows, grow_rule(*limits, USER),
                       np.random.Generator(np.random.PCG64(seed)), True)
        assert len(fast[0]) > 30
        for a, s in zip(fast, slow):
            np.testing.assert_array_equal(a, s)


def test_column_boxes_equal_the_path_boxes():
    """The one-pass-down column boxes FORDE fits with equal the leaf boxes of every path."""
    from forestgen.tree.arrays import ColumnBoxes

    rng = np.random.default_rng(8)
    n = 800
    x = rng.normal(size=n)
    df = pd.DataFrame({"x": x, "y": x + rng.normal(size=n),
                       "c": pd.Categorical(rng.integers(0, 6, n).astype(str)),
                       "k": pd.Categorical(np.where(x > 0, "a", "b"))})
    m = ARF(n_trees=3, random_state=0, n_jobs=1).fit(df)
    f, schema = m.forest_, m.encoder_.schema
    levels = np.where(schema.nominal_mask, schema.n_levels, 0)
    full = f.boxes(schema.d, levels)
    cols = ColumnBoxes(f, levels)
    for j in range(schema.d):
        lo, hi = cols.column(j)
        np.testing.assert_array_equal(lo, full.lower[:, j])
        np.testing.assert_array_equal(hi, full.upper[:, j])
        if levels[j]:
            np.testing.assert_array_equal(cols.levels(j, levels[j]),
                                          full.levels(j, levels[j]))
    assert (full.upper < np.inf).any() and not full.mask.all()
    # nodes numbered backwards (children below their parents): the walk down each tree
    from forestgen.tree.kernels import ForestView, _column_box_walk, column_box_kernel

    N = len(f.feature)
    new = N - 1 - np.arange(N)  # its own inverse: the old id of new id i is new[i]
    inv = new

    def relabel(a):
        return np.where(a >= 0, new[np.maximum(a, 0)], -1).astype(a.dtype)

    back = ForestView(f.feature[inv], f.threshold[inv], f.nan_left[inv], relabel(f.left)[inv],
                      relabel(f.right)[inv], f.cat_off[inv], f.cat_left, f.n_levels,
                      new[f.roots], f.node_leaf[inv])
    for j in range(schema.d):
        k = int(levels[j])
        want = column_box_kernel(f.view(), f.n_leaves, j, k)
        for got in (column_box_kernel(back, f.n_leaves, j, k),
                    _column_box_walk(f.view(), f.n_leaves, j, k)):
            for u, v in zip(got, want):
                np.testing.assert_array_equal(u, v)



def test_bounded_int_draws_what_integers_draws():
    """``bounded_int`` (and ``bounded_int_bits`` on the bit generator, what the candidate
    draws and bootstrap counts take) takes the numbers ``Generator.integers(0, high)`` takes
    from the same stream (trees depend on it), for small and 32-bit ranges."""
    from forestgen.tree.node_ops import bounded_int, bounded_int_bits

    @njit
    def draws(rng, highs, bits):
        out = np.empty(len(highs), np.int64)
        bitgen = rng.bit_generator
        for i in range(len(highs)):
            out[i] = bounded_int_bits(bitgen, highs[i]) if bits else bounded_int(rng, highs[i])
        return out

    highs = np.random.default_rng(0).choice(np.array([1, 2, 3, 9, 255, 2**31 + 7, 2**32]),
                                            size=400)
    for bits in (False, True):
        got = draws(np.random.default_rng(5), highs, bits)
        ref = np.random.default_rng(5)
        np.testing.assert_array_equal(got, [ref.integers(0, h) for h in highs])


@pytest.mark.parametrize("crit", [GINI, ENTROPY])
@pytest.mark.parametrize("missing", [False, True])
def test_exact_sum_paths_grow_the_ordered_tree(missing, crit):
    """Integral weights take the exact-sum paths (class weights packed in integers, one-pass
    partitions in any row order, the parent term once per node, split points bounded before
    they are scored, the left sums from the scan; entropy and missing rows read the packed
    sums unpacked); halving every weight and size limit (exact in binary floating point)
    takes the ordered paths and must grow the same tree with half the class weights."""
    Z, y, nominal, n_levels = _table(n=900, seed=3)
    if not missing:
        Z = np.nan_to_num(Z, nan=0.5)
    b = Binner.fit(Z, nominal, n_levels)
    Xb = narrow_codes(b.transform(Z))[:4]  # uint8 codes: three-word records
    n_bins = b.n_bins.astype(np.int64)[:4]
    for seed in range(3):
        w = draw_weights(len(Z), np.random.default_rng(seed))
        out = []
        for scale in (1.0, 0.5):
            rows = LabelledRows(Xb, n_bins, b.nominal[:4], y, w * scale)
            rule = grow_rule(2, -1, 1.0 * scale, [0.0, 3.0 * scale], 2, 0.0, crit)
            out.append(grow_tree(rows, rule, np.random.Generator(np.random.PCG64(seed)), True))
        exact, ordered = out
        assert len(exact[0]) > 30
        for k, (a, o) in enumerate(zip(exact, ordered)):
            np.testing.assert_array_equal(a, 2 * o if k == 7 else o)


def test_bin_thresholds_read_numeric_splits_and_refuse_bins_outside_the_column():
    flat = np.array([0.5, 1.5, 2.5, 10.0, 20.0])  # column 0: 3 thresholds, column 1: 2
    off = np.array([0, 3, 5])
    feature = np.array([0, 1, -1, 1, 0], np.int32)
    cat_off = np.array([-1, -1, -1, 0, -1], np.int64)  # node 3: a nominal split
    thr, ok = bin_thresholds(feature, np.array([2, 1, -1, 7, 0], np.int32), cat_off, flat, off)
    assert ok
    np.testing.assert_array_equal(thr, [2.5, 20.0, np.nan, np.nan, 0.5])
    _, ok = bin_thresholds(feature, np.array([2, 2, -1, 0, 0], np.int32), cat_off, flat, off)
    assert not ok  # column 1 has bins 0 and 1 only


@pytest.mark.parametrize("weights", ["bootstrap", "fractional"])
def test_node_room_holds_every_tree_the_limits_allow(weights):
    """The grower makes room (``_node_cap``) for ``2 L + 1`` nodes, ``L`` the most leaves
    the leaf limits allow; trees grown to small limits never pass it (the kernel has no
    bounds checks: this is what keeps it inside its arrays)."""
    from forestgen.tree.grow_impurity import _node_cap

    Z, _, nominal, n_levels = _table(n=800)
    b = Binner.fit(Z, nominal, n_levels)
    Xb = b.transform(Z)
    rng = np.random.default_rng(3)
    y = rng.integers(0, 2, len(Z))  # labels unrelated to the codes: few pure nodes
    fill = []
    for seed in range(12):
        w = draw_weights(len(Z), rng)
        if weights == "fractional":
            w = w * rng.uniform(0.3, 1.7, len(w))
        msl = [1.0, 0.5, 2.0][seed % 3]
        mcl = np.array([[0.0, 1.0], [1.0, 1.0], [0.0, 5.0], [0.3, 0.0]][seed % 4])
        rows = LabelledRows(Xb, b.n_bins.astype(np.int64), b.nominal, y, w)
        out = grow_tree(rows, grow_rule(2, -1, msl, mcl, 5, -1.0, GINI),
                        np.random.Generator(np.random.PCG64(seed)), True)
        inb = w > 0
        cap = _node_cap(int(inb.sum()), np.array([w[inb & (y == c)].sum() for c in (0, 1)]),
                        w.sum(), msl, mcl)
        assert len(out[0]) <= cap <= 2 * inb.sum() + 1
        fill.append(len(out[0]) / cap)
    assert max(fill) > 0.3  # the bound is close for some limits (the old room, 2 n + 1, was
    # 8-30 times these trees' nodes)


def test_node_room_ignores_limits_that_bound_nothing():
    from forestgen.tree.grow_impurity import _node_cap

    w = np.array([3.0, 5.0])
    assert _node_cap(10, w, 8.0, 0.0, np.zeros(2)) == 21
    assert _node_cap(10, w, 8.0, 1e-320, np.array([np.nan, 1e-320])) == 21
    assert _node_cap(10, w, 8.0, 4.0, np.zeros(2)) == 2 * 3 + 1  # 8 / 4 (+ margin)
    assert _node_cap(10, w, 8.0, 1.0, np.array([0.0, 5.0])) == 2 * 2 + 1
    assert _node_cap(0, np.zeros(2), 0.0, 1.0, np.ones(2)) == 3


@pytest.mark.parametrize("n_classes", [2, 3])
def test_a_reused_workspace_grows_the_trees_of_fresh_buffers(n_classes):
    """The splitter grows each thread's trees in one :class:`Workspace`; whatever earlier
    trees left in it (larger trees, other weights, deeper stacks) must not change a tree."""
    from forestgen.tree.grow_impurity import workspace

    Z, y, nominal, n_levels = _table(n=700, seed=6)
    if n_classes == 3:
        y = y + (Z[:, 3] > 0.5)
    b = Binner.fit(Z, nominal, n_levels)
    Xb = b.transform(Z)
    n_bins = b.n_bins.astype(np.int64)
    rng = np.random.default_rng(8)
    ws = workspace(Xb, n_classes, len(Z), len(Z))
    for seed in range(8):
        w = [np.ones(len(Z)), draw_weights(len(Z), rng),
             draw_weights(len(Z), rng) * rng.uniform(0.5, 1.5, len(Z)),
             (rng.random(len(Z)) < 0.2).astype(float)][seed % 4]  # big, then small trees
        rule = grow_rule(n_classes, [-1, 3][seed % 2], [1.0, 4.0][seed // 4], np.zeros(n_classes),
                         2, 0.0, [GINI, ENTROPY][seed % 2])
        rows = LabelledRows(Xb, n_bins, b.nominal, y, w)
        for route in (True, False):
            fresh = grow_tree(rows, rule, np.random.Generator(np.random.PCG64(seed)), route)
            reused = grow_tree(rows, rule, np.random.Generator(np.random.PCG64(seed)), route, ws)
            assert len(fresh[0]) > 5
            for a, r in zip(fresh, reused):
                np.testing.assert_array_equal(a, r)
    small = workspace(Xb, n_classes, 100, 100)
    with pytest.raises(ValueError, match="workspace is too small"):
        grow_tree(LabelledRows(Xb, n_bins, b.nominal, y, np.ones(len(Z))), rule,
                  np.random.default_rng(0), True, small)
