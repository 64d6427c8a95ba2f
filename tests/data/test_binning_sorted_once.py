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


def _old_level_codes(col: np.ndarray, nb: int) -> np.ndarray:
    codes = np.where(np.isnan(col), -1, col)
    return np.where((codes < 0) | (codes >= nb), nb, codes).astype(np.uint16)


@pytest.mark.parametrize("max_bins", [2, 7, 255])
def test_fit_transform_is_fit_then_transform(max_bins):
    """One task per column (thresholds and codes) gives the binner and codes of ``fit`` then
    ``transform``; ``fit``'s thresholds are the NumPy definition of the non-NaN values, and
    nominal codes those of the former NumPy expression (NaN, negative, too large: missing)."""
    from forestgen.data.binning import Binner

    rng = np.random.default_rng(max_bins)
    n = 2000
    cols = [rng.standard_normal(n), np.round(rng.standard_normal(n), 1),
            np.where(rng.random(n) < 0.2, np.nan, rng.exponential(size=n)),
            rng.choice([-0.0, 0.0, 1.0, np.nan], n), np.full(n, np.nan),
            rng.choice([0.0, 1.0, 2.0, 3.0, np.nan, -1.0, 7.0, 2.5], n),
            rng.integers(0, 5, n).astype(float)]
    Z = np.column_stack(cols)
    nominal = np.array([False] * 5 + [True, True])
    n_levels = np.array([0, 0, 0, 0, 0, 4, 5])
    a = Binner.fit(Z, nominal, n_levels, max_bins)
    codes_a = a.transform(Z)
    for jobs in (1, 2):
        b, codes_b = Binner.fit_transform(Z, nominal, n_levels, max_bins, n_jobs=jobs)
        np.testing.assert_array_equal(codes_a, codes_b)
        np.testing.assert_array_equal(a.n_bins, b.n_bins)
        for x, y in zip(a.thresholds, b.thresholds):
            assert x.tobytes() == y.tobytes()
    for j in range(5):
        col = Z[:, j]
        assert a.thresholds[j].tobytes() == _reference(col[~np.isnan(col)], max_bins).tobytes()
    for j in (5, 6):
        np.testing.assert_array_equal(codes_a[j], _old_level_codes(Z[:, j], int(a.n_bins[j])))
    assert len(a.thresholds[2]) >= 1 and (codes_a[2] == a.n_bins[2]).sum() > 0


@pytest.mark.parametrize("m", [1, 2, 5, 254])
def test_codes_with_crowded_and_infinite_thresholds(m):
    """Thresholds crowded into a few grid cells (a heavy tail), ties of values with
    thresholds, and an infinite last threshold: still ``searchsorted(..., "left")``."""
    from forestgen.data.binning import _bin_codes

    rng = np.random.default_rng(10 + m)
    col = np.exp(rng.standard_normal(4000) * 6)
    for thr in (np.sort(rng.choice(col, m, replace=False)),
                np.r_[np.sort(rng.choice(col, m - 1, replace=False)), np.inf]):
        x = np.r_[col, thr, -thr, [np.nan, np.inf, -np.inf, 0.0, -0.0]]
        out = np.empty(len(x), np.uint16)
        _bin_codes(x, thr, out)
        want = np.searchsorted(thr, np.where(np.isnan(x), 0.0, x), side="left")
        want[np.isnan(x)] = m + 1
        np.testing.assert_array_equal(out, want)
