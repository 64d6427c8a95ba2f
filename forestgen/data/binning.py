"""Quantile binning of an encoded matrix into small-integer codes for histogram split search.

Numeric and ordered-discrete columns get sorted candidate thresholds (midpoints between
consecutive distinct training values, thinned to quantiles when there are more than
``max_bins``); a value's code is the number of thresholds strictly below it, so
``code <= b`` is the same event as ``x <= thresholds[b]``. Nominal columns keep their level
codes. Every column reserves one extra code, ``n_bins[j]``, for missing (and unseen) values.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from forestgen.parallel import thread_map

MAX_CODES = np.iinfo(np.uint16).max


@dataclass
class Binner:
    """Fitted bin edges. ``thresholds[j]`` is empty for nominal columns."""

    thresholds: list[np.ndarray]
    n_bins: np.ndarray  # int32 [d]: codes 0..n_bins-1 are values, n_bins is "missing"
    nominal: np.ndarray  # bool [d]

    @classmethod
    def fit(
        cls,
        Z: np.ndarray,
        nominal: np.ndarray,
        n_levels: np.ndarray,
        max_bins: int = 255,
        n_jobs: int | None = 1,
    ) -> Binner:
        """Fit thresholds on the encoded matrix ``Z`` (float64, NaN = missing); the columns
        on ``n_jobs`` threads (the same thresholds for any ``n_jobs``)."""
        if max_bins < 2:
            raise ValueError(f"max_bins must be >= 2, got {max_bins}")
        d = Z.shape[1]
        n_bins = np.zeros(d, dtype=np.int32)
        for j in range(d):
            if nominal[j]:
                k = int(n_levels[j])
                if k + 1 > MAX_CODES:
                    raise ValueError(
                        f"column {j} has {k} levels; at most {MAX_CODES - 1} supported"
                    )
                n_bins[j] = max(k, 1)

        def column(j: int) -> np.ndarray:
            if nominal[j]:
                return np.empty(0)
            col = Z[:, j]
            return _thresholds(col[~np.isnan(col)], max_bins)

        thresholds = thread_map(column, d, n_jobs)
        for j in range(d):
            if not nominal[j]:
                n_bins[j] = len(thresholds[j]) + 1
        return cls(thresholds, n_bins, np.asarray(nominal, dtype=bool).copy())

    def transform(self, Z: np.ndarray, n_jobs: int | None = 1) -> np.ndarray:
        """Codes as uint16, feature-major ``[d, n]`` (contiguous per feature for histograms);
        the columns on ``n_jobs`` threads."""
        n, d = Z.shape
        out = np.empty((d, n), dtype=np.uint16)

        def column(j: int) -> None:
            col = Z[:, j]
            if self.nominal[j]:
                miss = np.isnan(col)
                codes = np.where(miss, -1, col)
                codes = np.where((codes < 0) | (codes >= self.n_bins[j]), self.n_bins[j], codes)
                out[j] = codes.astype(np.uint16)
            else:
                _bin_codes(col, np.asarray(self.thresholds[j], np.float64), out[j])

        thread_map(column, d, n_jobs)
        return out

    def threshold_value(self, feature: int, code: int) -> float:
        return float(self.thresholds[feature][code])


def _thresholds(col: np.ndarray, max_bins: int) -> np.ndarray:
    """Thresholds of a column without NaN: sorted once, the distinct values and the quantiles
    read off that one sorted copy (``np.unique`` and ``np.quantile`` of ``col`` itself
    would sort or partition it again)."""
    s = np.sort(col)
    u = s[np.r_[True, s[1:] != s[:-1]]] if len(s) else s  # np.unique(col)
    if len(u) <= 1:
        return np.empty(0)
    mids = (u[:-1] + u[1:]) / 2.0
    # guard against midpoints that round onto the lower neighbour for huge / adjacent floats
    mids = np.where(mids > u[:-1], mids, u[1:])
    if len(u) <= max_bins:
        return mids
    # thin to quantiles of the data, snapped onto the midpoints
    qs = np.quantile(s, np.linspace(0, 1, max_bins + 1)[1:-1], method="lower")
    pos = np.unique(np.searchsorted(u, qs, side="left"))
    pos = pos[pos < len(mids)]
    return mids[pos]


@njit(cache=True, nogil=True)
def _bin_codes(col, thr, out):
    """``out[i]``: the number of thresholds ``thr`` (sorted) strictly below ``col[i]``
    (``np.searchsorted(thr, col, side="left")``), ``len(thr) + 1`` (the missing code) where
    ``col[i]`` is NaN; a branch-free binary search per value."""
    m = thr.shape[0]
    for i in range(col.shape[0]):
        v = col[i]
        if np.isnan(v):
            out[i] = m + 1
            continue
        lo = 0  # thr[:lo] < v; search the first threshold >= v in lo..lo + size
        size = m
        while size > 0:
            half = size >> 1
            below = thr[lo + half] < v
            lo = lo + half + 1 if below else lo
            size = size - half - 1 if below else half
        out[i] = lo
