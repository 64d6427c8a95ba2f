"""Binner thresholds read off one sorted copy equal the np.unique / np.quantile definition."""

import numpy as np
import pytest

from forestgen.data.binning import _thresholds


def _reference(col: np.ndarray, max_bins: int) -> np.ndarray:
    u = np.unique(col)
    if len(u) <= 1:
        return np.empty(0)
    mids = (u[:-1] + u[1:]) / 2.0
    mids = np.where(mids > u[:-1], mids, u[1:])
    if len(u) <= max_bins:
        return mids
    qs = np.quantile(col, np.linspace(0, 1, max_bins + 1)[1:-1], method="lower")
    pos = np.unique(np.searchsorted(u, qs, side="left"))
    return mids[pos[pos < len(mids)]]


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("max_bins", [2, 7, 255])
def test_thresholds_equal_the_unique_quantile_definition(seed, max_bins):
    rng = np.random.default_rng(seed)
    cols = [rng.standard_normal(3000), np.round(rng.standard_normal(3000), 1),
            rng.integers(0, 40, 500).astype(float), np.r_[-0.0, 0.0, 0.0, -0.0, 1.0, 2.0],
            np.full(10, 3.5), np.array([1.0]), np.empty(0), np.exp(rng.standard_normal(999) * 30)]
    for col in cols:
        got, want = _thresholds(col, max_bins), _reference(col, max_bins)
        assert got.tobytes() == want.tobytes()  # same values, same signs of zero


@pytest.mark.parametrize("m", [0, 1, 2, 3, 7, 254])
def test_codes_count_the_thresholds_below_each_value(m):
    from forestgen.data.binning import _bin_codes

    rng = np.random.default_rng(m)
    thr = np.sort(rng.normal(size=m))
    col = np.r_[rng.normal(size=3000), thr, [np.nan, np.inf, -np.inf, 0.0]]
    out = np.empty(len(col), np.uint16)
    _bin_codes(col, thr, out)
    want = np.searchsorted(thr, np.where(np.isnan(col), 0.0, col), side="left")
    want[np.isnan(col)] = m + 1  # the missing code
    np.testing.assert_array_equal(out, want)
    assert len(np.unique(out)) == m + 2  # every code 0..m and the missing one
