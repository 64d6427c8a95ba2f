"""FORDE's linear-time counting (issue 33) gives what sorting and numpy's weighted sums give."""

import numpy as np

from forestgen.leaves.categorical import pair_counts
from forestgen.leaves.stats import MomentStats


def test_pair_counts_dense_and_sorted_agree_with_a_plain_tally():
    rng = np.random.default_rng(3)
    flat = rng.integers(0, 900, 2_000)
    w = rng.integers(0, 3, 2_000) * rng.uniform(0.5, 1.5, 2_000)  # zero weights: out of bag
    for weight in (None, w):
        dense = pair_counts(flat, 900, weight)
        sort = pair_counts(flat, 10**12, weight)  # too wide for a table: sorted
        tally: dict[int, float] = {}
        for i, key in enumerate(flat):
            tally[int(key)] = tally.get(int(key), 0.0) + (1.0 if weight is None else weight[i])
        keys = sorted(k for k, v in tally.items() if v > 0)
        for key, cnt in (dense, sort):
            assert key.tolist() == keys
            assert cnt.tobytes() == np.array([tally[k] for k in keys]).tobytes()


def test_moments_match_weighted_numpy_per_leaf():
    rng = np.random.default_rng(4)
    x = rng.normal(5.0, 3.0, 3_000)
    x[rng.random(3_000) < 0.05] = np.nan
    leaf = rng.integers(0, 40, 3_000).astype(np.int32)
    w = rng.integers(1, 4, 3_000).astype(float)
    st = MomentStats.from_pairs(x, leaf, 41, weight=w, minmax=True)
    for j in range(40):
        at = (leaf == j) & ~np.isnan(x)
        mean = np.average(x[at], weights=w[at])
        np.testing.assert_allclose(st.count[j], w[at].sum())
        np.testing.assert_allclose(st.mean[j], mean, rtol=1e-12)
        np.testing.assert_allclose(st.m2[j], np.sum(w[at] * (x[at] - mean) ** 2), rtol=1e-9)
        assert st.vmin[j] == x[at].min() and st.vmax[j] == x[at].max()
    assert st.count[40] == 0 and np.isnan(st.mean[40]) and np.isnan(st.vmin[40])
