"""TreeRecord.check names the bad link field, with compiled (integer ids) and numpy (other
dtypes, e.g. float node arrays) validation alike."""

import numpy as np
import pytest

from forestgen.tree.record import TreeRecord


def _record(dtype=np.int32, **change):
    # root 0 splits into 1 (leaf) and 2; node 2 splits into 3 and 4 (leaves)
    f = dict(feature=np.array([0, -1, 1, -1, -1], dtype),
             threshold=np.array([0.5, np.nan, 1.5, np.nan, np.nan]),
             nan_left=np.zeros(5, np.uint8), left=np.array([1, -1, 3, -1, -1], dtype),
             right=np.array([2, -1, 4, -1, -1], dtype), cat_off=np.full(5, -1, np.int64),
             cat_left=np.zeros(0, np.uint8), row_node=np.array([1, 3, 4, 4]))
    for k, v in change.items():
        f[k] = np.asarray(v, np.int64 if k == "row_node" else dtype)
    return TreeRecord(**f)


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.float64])
def test_check_accepts_a_valid_tree_and_names_the_bad_field(dtype):
    assert _record(dtype).check().n_nodes == 5
    cases = {"left": dict(left=[1, -1, 5, -1, -1]), "right": dict(right=[2, 0, 4, -1, -1]),
             "row_node": dict(row_node=[1, 2, 4, 4])}
    for name, change in cases.items():
        with pytest.raises(ValueError, match=f"TreeRecord.{name} must"):
            _record(dtype, **change).check()
    with pytest.raises(ValueError, match="TreeRecord.row_node"):
        _record(dtype, row_node=[1, 3, 7]).check()
    with pytest.raises(ValueError, match="TreeRecord.left"):  # left is checked first
        _record(dtype, left=[0, -1, 3, -1, -1], right=[9, -1, 4, -1, -1]).check()


class _FixedTree:
    """A splitter returning the tree of :func:`_record` with the given ``row_node``."""

    labelled = True

    def __init__(self, row_node):
        self.row_node = row_node

    def tree_grower(self, data, y, limits):
        return lambda w, rng: _record(row_node=self.row_node)


@pytest.mark.parametrize("row_node, ok", [([1, 3, 4, 4], True), ([1, 2, 4, 4], False),
                                          ([1, 3, 7, 4], False), ([1, 3, -1, 4], False)])
def test_routed_forest_checks_row_node_as_it_lists_the_leaves(row_node, ok):
    from forestgen.splitters.base import GrowLimits, TreeData
    from forestgen.tree.forest import grow_forest_routed

    data = TreeData(np.zeros((2, 4), np.uint8), np.full(2, 3), np.zeros(2, bool),
                    [np.arange(2.0)] * 2, route_rows=True)
    rngs = [np.random.default_rng(0)] * 2
    run = lambda: grow_forest_routed(_FixedTree(row_node), data, None, np.ones((2, 4)), rngs,  # noqa: E731
                                     GrowLimits(), n_jobs=1)
    if not ok:
        with pytest.raises(ValueError, match="TreeRecord.row_node"):
            run()
        return
    forest, leaves = run()
    # leaves of the record in node order: node 1 -> 0, 3 -> 1, 4 -> 2; tree 1 after tree 0's 3
    np.testing.assert_array_equal(leaves, [[0, 3], [1, 4], [2, 5], [2, 5]])
    assert forest.n_leaves == 6


def test_tree_grower_grows_what_grow_grows_and_keeps_a_subclass_grow():
    from forestgen.splitters.base import GrowLimits, TreeData
    from forestgen.splitters.impurity import GiniSplitter

    rng = np.random.default_rng(3)
    data = TreeData(rng.integers(0, 4, (3, 200)).astype(np.uint8), np.full(3, 4),
                    np.array([False, True, False]), [np.arange(3.0)] * 3, route_rows=True)
    y = rng.integers(0, 2, 200)
    w = rng.integers(0, 3, 200).astype(float)
    lim = GrowLimits(max_features=2, n_classes=2, min_class_leaf=np.array([0.0, 2.0]))
    sp = GiniSplitter()
    a = sp.grow(data, y, w, np.random.default_rng(7), lim)
    b = sp.tree_grower(data, y, lim)(w, np.random.default_rng(7))
    assert a.n_nodes > 5
    for f in ("feature", "threshold", "left", "right", "cat_left", "class_weight", "row_node"):
        np.testing.assert_array_equal(getattr(a, f), getattr(b, f))

    class Stump(GiniSplitter):
        def grow(self, data, y, w, rng, limits):
            return _record()

    assert Stump().tree_grower(data, y, lim)(w, None).n_nodes == 5
