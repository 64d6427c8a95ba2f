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
