"""Leaf-mixture weights from plain coverage counts (no mask, no sample weights) are counted
without ``[n, B]`` weights: the same bits as the weighted count with unit weights, whatever the
memory order of the leaves (a forest's are tree-major)."""

import numpy as np
import pytest

from forestgen.ensemble import MixtureEnsembler


@pytest.mark.parametrize("tree_major", [True, False])
def test_counts_equal_unit_weighted_counts(tree_major):
    rng = np.random.default_rng(0)
    n, B, L = 3000, 7, 900
    leaf_tree = np.repeat(np.arange(B), L // B)
    L = len(leaf_tree)
    # each tree's rows reach that tree's leaves
    starts = np.searchsorted(leaf_tree, np.arange(B))
    ends = np.r_[starts[1:], L]
    bt = np.stack([rng.integers(starts[b], ends[b] - 5, n) for b in range(B)]).astype(np.int32)
    leaves = bt.T if tree_major else np.ascontiguousarray(bt.T)
    e = MixtureEnsembler()
    got = e.leaf_log_weights(leaves, L, leaf_tree, B)
    want = e.leaf_log_weights(leaves, L, leaf_tree, B, sample_weight=np.ones(n))
    np.testing.assert_array_equal(got, want)
    assert np.isneginf(got).sum() >= 5 * B  # leaves no row reaches weigh nothing
    np.testing.assert_allclose(np.exp(got).sum(), 1.0)
