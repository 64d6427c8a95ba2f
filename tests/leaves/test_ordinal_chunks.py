"""The ordinal-kernel leaf smooths its leaves in fixed-budget blocks (issue 15): the fitted
tables equal the one-block fit exactly, and the gap levels get mass."""

from __future__ import annotations

import numpy as np

import forestgen.leaves.ordinal_kernel as ok_mod
from forestgen.leaves.base import ColumnCell
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
