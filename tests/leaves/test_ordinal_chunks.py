"""The ordinal-kernel leaf smooths its leaves in fixed-budget blocks (issue 15): the fitted
tables equal the one-block fit exactly, and the gap levels get mass."""

from __future__ import annotations

import numpy as np

import forestgen.leaves.ordinal_kernel as ok_mod
from forestgen.leaves.base import ColumnCell
from forestgen.leaves.categorical import CategoricalLeaf
from forestgen.leaves.ordinal_kernel import OrdinalKernelLeaf


def test_blockwise_smoothing_equals_one_block(monkeypatch):
    rng = np.random.default_rng(0)
    L, k, n = 37, 12, 900
    leaf = rng.integers(0, L, n)
    x = rng.choice([0, 1, 2, 4, 5, 8, 11], n).astype(float)  # gaps at 3, 6, 7, 9, 10
    x[rng.random(n) < 0.05] = np.nan
    lo = rng.integers(-1, 4, L).astype(float)
    allowed = (np.arange(k)[None, :] > lo[:, None]) & (np.arange(k)[None, :] <= 10)
    cell = ColumnCell(lower=lo, upper=np.full(L, 10.0), allowed=allowed, data_min=0.0,
                      data_max=11.0, n_levels=k)
    monkeypatch.setattr(ok_mod, "LEVEL_BUDGET", 10**9)
    one = OrdinalKernelLeaf().fit(x, leaf, cell)
    monkeypatch.setattr(ok_mod, "LEVEL_BUDGET", 5 * k)  # 5 leaves per block
    many = OrdinalKernelLeaf().fit(x, leaf, cell)
    for name, a in one.param_arrays().items():
        b = many.param_arrays()[name]
        assert a.dtype == b.dtype, name
        np.testing.assert_array_equal(a, b, err_msg=name)
    pmf = many.probs(np.arange(L))
    np.testing.assert_allclose(pmf.sum(1), 1.0, atol=1e-12)
    assert not (pmf[~allowed] > 0).any()  # zero outside each cell
    assert (pmf[:, 3][allowed[:, 3]] > 0).all()  # a gap level gets mass where allowed


def test_prior_smoothed_leaf_stays_sparse():
    """With the marginal prior every allowed level of a leaf has mass, yet the smoothed leaf
    lists only the levels seen in it plus the gap levels: the others keep the shared prior
    share. Its pmf equals the dense smoothing of the prior-smoothed categorical pmf."""
    rng = np.random.default_rng(1)
    L, k, n = 300, 40, 3000
    leaf = rng.integers(0, L, n)
    x = rng.integers(0, k, n).astype(float)
    x[np.isin(x, [7, 20, 33])] = 1.0  # gap levels
    allowed = rng.random((L, k)) < 0.8
    cell = ColumnCell(lower=np.full(L, -np.inf), upper=np.full(L, np.inf), allowed=allowed,
                      data_min=0.0, data_max=k - 1.0, n_levels=k)
    lm = OrdinalKernelLeaf(prior=0.3).fit(x, leaf, cell)
    plain = CategoricalLeaf(prior=0.3).fit(x, leaf, cell)
    base = plain.probs(np.arange(L))
    gap = np.isin(np.arange(k), [7, 20, 33])
    fill = np.where(gap, ok_mod.ordinal_kernel_smooth(base, 0.5), 0.0) * allowed
    fill *= np.minimum(1.0, ok_mod.MAX_GAP_SHARE / np.maximum(fill.sum(1, keepdims=True), 1e-300))
    want = (base + fill) / (base + fill).sum(1, keepdims=True)
    np.testing.assert_allclose(lm.probs(np.arange(L)), want, rtol=1e-12, atol=1e-15)
    assert (want[allowed] > 0).all()  # dense support ...
    assert len(lm.prob_) == len(plain.prob_) + (allowed & gap).sum()  # ... sparse storage
    assert len(lm.prob_) < 0.4 * allowed.sum()
