"""FORDE's per-column pair statistics in one pass (no filtered copies of the n * B pairs) give
the bits of the filter-then-count formulation: NaN values, out-of-range codes, levels a leaf
does not allow, int32 or int64 leaf ids, with and without pair weights."""

import numpy as np
import pytest

from forestgen.leaves.base import ColumnCell
from forestgen.leaves.categorical import CategoricalLeaf, level_entries, pair_counts
from forestgen.leaves.stats import MomentStats
from forestgen.leaves.truncnorm import TruncNormalLeaf


def _pairs(seed=0, n=3000, L=40):
    rng = np.random.default_rng(seed)
    x = rng.normal(2.0, 3.0, n)
    x[rng.random(n) < 0.1] = np.nan
    return x, rng.integers(0, L, n), rng.uniform(0.5, 2.0, n), L


def _reference_moments(x, leaf, w, L):
    """The bincount formulation of :func:`forestgen.leaves.stats._moments` on the non-NaN
    pairs (sums in pair order)."""
    ok = ~np.isnan(x)
    x, leaf, w = x[ok], leaf[ok], w[ok]
    ref = np.zeros(L)
    ref[leaf] = x  # the last value of each leaf
    cnt = np.bincount(leaf, weights=w, minlength=L)
    with np.errstate(invalid="ignore", divide="ignore"):
        shift = np.bincount(leaf, weights=w * (x - ref[leaf]), minlength=L) / cnt
    dev = (x - ref[leaf]) - shift[leaf]
    return cnt, ref + shift, np.bincount(leaf, weights=w * dev * dev, minlength=L)


def test_moments_skip_nan_and_match_the_filtered_sums_bit_for_bit():
    x, leaf, w, L = _pairs()
    for lv in (leaf.astype(np.int32), leaf.astype(np.int64)):
        for weight in (None, w):
            st = MomentStats.from_pairs(x, lv, L + 2, weight=weight)
            cnt, mean, m2 = _reference_moments(x, leaf, np.ones(len(x)) if weight is None
                                               else w, L + 2)
            np.testing.assert_array_equal(st.count, cnt)
            np.testing.assert_array_equal(st.mean, mean)
            np.testing.assert_array_equal(st.m2, m2)
    st = MomentStats.from_pairs(x, leaf.astype(np.int32), L, minmax=True)
    ok = ~np.isnan(x)
    for j in range(L):
        v = x[ok & (leaf == j)]
        assert st.vmin[j] == v.min() and st.vmax[j] == v.max()


def test_categorical_counts_keep_only_valid_allowed_pairs():
    rng = np.random.default_rng(1)
    n, L, k = 4000, 30, 5
    x = rng.integers(-1, k + 1, n).astype(float)  # -1 and k: outside 0..k-1
    x[rng.random(n) < 0.1] = np.nan
    leaf = rng.integers(0, L, n)
    w = rng.uniform(0.5, 2.0, n)
    allowed = rng.random((L, k)) < 0.7
    cell = ColumnCell(lower=np.zeros(L), upper=np.ones(L), allowed=allowed, data_min=0.0,
                      data_max=k - 1.0, n_levels=k)
    for weight in (None, w):
        lm = CategoricalLeaf().fit(x, leaf.astype(np.int32), cell, weight)
        ok = ~np.isnan(x)
        c = np.where(ok, x, -1).astype(np.int64)
        keep = ok & (c >= 0) & (c < k)
        keep[keep] &= allowed[leaf[keep], c[keep]]
        key, cnt = pair_counts(leaf[keep] * k + c[keep], L * k,
                               None if weight is None else w[keep])
        np.testing.assert_array_equal(lm.count_, np.bincount(key // k, weights=cnt,
                                                             minlength=L))
        np.testing.assert_array_equal(lm.code_, key % k)


@pytest.mark.parametrize("scale", [0.25, 8.0, 2.0 ** -60, 3.0])
@pytest.mark.parametrize("weighted", [False, True])
def test_scaled_as_read_equals_scaled_copy(scale, weighted):
    """A power-of-two ``scale`` is applied as the kernel reads each value (no scaled copy):
    the same bits as the statistics of ``x / scale``; any other scale divides a copy."""
    rng = np.random.default_rng(4)
    n, L = 4000, 60
    x = rng.normal(size=n) * 1e3
    x[rng.random(n) < 0.05] = np.nan
    leaf = rng.integers(0, L, n)
    w = rng.random(n) if weighted else None
    a = MomentStats.from_pairs(x, leaf, L, scale=scale, weight=w)
    b = MomentStats.from_pairs(x / scale, leaf, L, weight=w)
    for f in ("count", "mean", "m2"):
        np.testing.assert_array_equal(getattr(a, f), getattr(b, f))
    assert np.isfinite(a.m2).sum() == L


def test_truncnorm_fit_reads_scaled_values_as_before():
    from forestgen.leaves import TruncNormalLeaf
    from forestgen.leaves.base import ColumnCell, scaled_cell
    from forestgen.leaves.stats import column_scale

    rng = np.random.default_rng(5)
    n, L = 3000, 40
    x = rng.normal(size=n) * 37.0 + 5.0
    leaf = rng.integers(0, L, n)
    cell = ColumnCell(lower=np.full(L, -200.0), upper=np.full(L, 250.0), allowed=None,
                      data_min=float(x.min()), data_max=float(x.max()), n_levels=0)
    s = column_scale(cell.data_min, cell.data_max)
    assert s != 1.0
    a = TruncNormalLeaf().fit(x, leaf, cell)
    b = TruncNormalLeaf()
    b._fit_scaled(x / s, leaf, scaled_cell(cell, s))  # the former path: a scaled copy
    b._unscale(s)
    for f in ("mu_", "sigma_", "lo_", "hi_", "count_", "logz_"):
        np.testing.assert_array_equal(getattr(a, f), getattr(b, f))


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("use_allowed", [False, True])
def test_level_entries_dense_pass_equals_the_sorted_keys(weighted, use_allowed):
    """The categorical leaf's counts in one pass into a dense table give the arrays of the
    keys-then-sort formulation bit for bit (NaN values, codes outside 0..k-1, levels a leaf
    does not allow, leaves without pairs); the allowed-level helpers equal numpy's."""
    from forestgen.leaves.categorical import _allowed_counts, _pack_rows, level_entries

    rng = np.random.default_rng(2)
    n, L, k = 5000, 70, 11
    x = rng.integers(-1, k + 1, n).astype(float)
    x[rng.random(n) < 0.1] = np.nan
    leaf = rng.integers(0, L - 3, n).astype(np.int32)  # the last leaves get no pairs
    w = rng.uniform(0.5, 2.0, n) if weighted else None
    allowed = rng.random((L, k)) < 0.6 if use_allowed else None
    a = level_entries(x, leaf, k, allowed, w, L, dense=True)
    b = level_entries(x, leaf, k, allowed, w, L, dense=False)
    assert len(a[0]) > 100
    for u, v in zip(a, b):
        assert u.dtype == v.dtype
        np.testing.assert_array_equal(u, v)
    bits = rng.random((L, k)) < 0.3
    bits[:5] = False  # rows allowing no level: all levels
    ref = bits.copy()
    ref[ref.sum(1) == 0] = True
    got = bits.copy()
    np.testing.assert_array_equal(_allowed_counts(got), ref.sum(1))
    np.testing.assert_array_equal(got, ref)
    for kk in (1, 7, 8, 9, 17):
        m = rng.random((L, kk)) < 0.5
        np.testing.assert_array_equal(_pack_rows(m), np.packbits(m, axis=1, bitorder="little"))


def _tree_leaves(seed=1, n=2500, B=6, per_tree=150):
    """A column of ``n`` values (some NaN) and their leaves ``[B, n]`` in ``B`` trees of
    ``per_tree`` leaves each (ids one block per tree, as a forest's), pair weights ``[B, n]``."""
    rng = np.random.default_rng(seed)
    x = rng.normal(-1.0, 4.0, n)
    x[rng.random(n) < 0.05] = np.nan
    leaves = (rng.integers(0, per_tree, (B, n)) + per_tree * np.arange(B)[:, None])
    return x, leaves.astype(np.int32), rng.uniform(0.3, 2.0, (B, n)), B * per_tree + 3


@pytest.mark.parametrize("scale", [1.0, 0.25, 3.0])  # exact reciprocal, scaled copy
def test_column_moments_equal_the_tiled_pairs_bit_for_bit(scale):
    x, leaves, w, L = _tree_leaves()
    B = leaves.shape[0]
    for weight in (None, w):
        got = MomentStats.from_column(x, leaves, L, scale=scale, weight=weight)
        ref = MomentStats.from_pairs(np.tile(x, B), leaves.ravel(), L, scale=scale,
                                     weight=None if weight is None else weight.ravel())
        for k in ("count", "mean", "m2"):
            assert getattr(got, k).tobytes() == getattr(ref, k).tobytes(), k
        assert got.scale == ref.scale
    with pytest.raises(ValueError, match="from_column"):
        MomentStats.from_column(x[:-1], leaves, L)


def test_fit_column_fits_what_fit_fits_on_the_tiled_pairs():
    """The truncated normal reads the column in place; a leaf model without its own
    ``fit_column`` (here the categorical one) is given the tiled pairs by the base class:
    both fit what ``fit`` fits on ``np.tile(x, B)``, ``leaves.ravel()``."""
    x, leaves, w, L = _tree_leaves(seed=2)
    B = leaves.shape[0]
    rng = np.random.default_rng(3)
    lower = np.sort(rng.normal(-1.0, 4.0, L))
    upper = lower + rng.exponential(2.0, L)
    lower[:5] = -np.inf
    cell = ColumnCell(lower=lower, upper=upper, allowed=None, data_min=-15.0, data_max=13.0,
                      n_levels=0)
    for weight in (None, w):
        flat_w = None if weight is None else weight.ravel()
        a = TruncNormalLeaf().fit_column(x, leaves, cell, weight)
        b = TruncNormalLeaf().fit(np.tile(x, B), leaves.ravel(), cell, flat_w)
        for k in TruncNormalLeaf.fitted_arrays:
            assert np.asarray(getattr(a, k)).tobytes() == np.asarray(getattr(b, k)).tobytes()
        assert a.lognorm_.tobytes() == b.lognorm_.tobytes()  # (derived on first read)
    codes = np.where(np.isnan(x), np.nan, np.floor(np.abs(x)) % 4)
    lcell = ColumnCell(lower=np.zeros(L), upper=np.zeros(L), allowed=None, data_min=0.0,
                       data_max=3.0, n_levels=4)
    a = CategoricalLeaf(alpha=0.5).fit_column(codes, leaves, lcell, w)
    b = CategoricalLeaf(alpha=0.5).fit(np.tile(codes, B), leaves.ravel(), lcell, w.ravel())
    for k in ("offset_", "code_", "prob_", "rest_"):
        assert getattr(a, k).tobytes() == getattr(b, k).tobytes(), k


@pytest.mark.parametrize("dense", [True, False])
def test_level_entries_of_a_column_in_trees_equal_the_tiled_pairs(dense):
    x, leaves, w, L = _tree_leaves(seed=4)
    B, k = leaves.shape[0], 5
    codes = np.where(np.isnan(x), np.nan, np.floor(np.abs(x)) % (k + 1))  # (code k: skipped)
    allowed = np.random.default_rng(5).random((L, k)) < 0.8
    for weight in (None, w):
        got = level_entries(codes, leaves, k, allowed, weight, L, dense=dense)
        ref = level_entries(np.tile(codes, B), leaves.ravel(), k, allowed,
                            None if weight is None else weight.ravel(), L, dense=dense)
        for a, b in zip(got, ref):
            assert a.tobytes() == b.tobytes()
    with pytest.raises(ValueError, match="level_entries"):
        level_entries(codes, leaves, k, allowed, w[:, :-1], L)
