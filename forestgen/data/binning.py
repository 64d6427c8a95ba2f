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

        q = _quantile_levels(max_bins)

        def column(j: int) -> np.ndarray:
            if nominal[j]:
                return np.empty(0)
            return _column_thresholds(Z[:, j], max_bins, q)

        thresholds = thread_map(column, d, n_jobs)
        for j in range(d):
            if not nominal[j]:
                n_bins[j] = len(thresholds[j]) + 1
        return cls(thresholds, n_bins, np.asarray(nominal, dtype=bool).copy())

    @classmethod
    def fit_transform(
        cls,
        Z: np.ndarray,
        nominal: np.ndarray,
        n_levels: np.ndarray,
        max_bins: int = 255,
        n_jobs: int | None = 1,
    ) -> tuple[Binner, np.ndarray]:
        """``(Binner.fit(Z, ...), its transform(Z))`` with each column's thresholds and codes
        made in one task (the columns on ``n_jobs`` threads): the same binner and codes, in
        one pass over the columns instead of two. A task runs a few GIL-free kernels and one
        ``sort``, so the columns of a pool share the GIL with other threads (ARF's rule
        search) only a few times each."""
        if max_bins < 2:
            raise ValueError(f"max_bins must be >= 2, got {max_bins}")
        n, d = Z.shape
        binner = cls([np.empty(0)] * d, np.zeros(d, np.int32),
                     np.asarray(nominal, dtype=bool).copy())
        for j in range(d):
            if nominal[j]:
                k = int(n_levels[j])
                if k + 1 > MAX_CODES:
                    raise ValueError(
                        f"column {j} has {k} levels; at most {MAX_CODES - 1} supported"
                    )
                binner.n_bins[j] = max(k, 1)
        q = _quantile_levels(max_bins)
        out = np.empty((d, n), dtype=np.uint16)

        def column(j: int) -> None:
            col = Z[:, j]
            if nominal[j]:
                _level_codes(col, int(binner.n_bins[j]), out[j])
                return
            thr = _column_thresholds(col, max_bins, q)
            binner.thresholds[j] = thr
            binner.n_bins[j] = len(thr) + 1
            _bin_codes(col, thr, out[j])

        thread_map(column, d, n_jobs)
        return binner, out

    def transform(self, Z: np.ndarray, n_jobs: int | None = 1) -> np.ndarray:
        """Codes as uint16, feature-major ``[d, n]`` (contiguous per feature for histograms);
        the columns on ``n_jobs`` threads."""
        n, d = Z.shape
        out = np.empty((d, n), dtype=np.uint16)

        def column(j: int) -> None:
            col = Z[:, j]
            if self.nominal[j]:
                _level_codes(col, int(self.n_bins[j]), out[j])
            else:
                _bin_codes(col, np.asarray(self.thresholds[j], np.float64), out[j])

        thread_map(column, d, n_jobs)
        return out

    def threshold_value(self, feature: int, code: int) -> float:
        return float(self.thresholds[feature][code])


def _quantile_levels(max_bins: int) -> np.ndarray:
    """The probabilities of the quantiles a column with more than ``max_bins`` distinct
    values is thinned to."""
    return np.linspace(0, 1, max_bins + 1)[1:-1]


def _thresholds(col: np.ndarray, max_bins: int) -> np.ndarray:
    """Thresholds of a column without NaN: sorted once, the distinct values and the quantiles
    read off that one sorted copy (``np.unique`` and ``np.quantile`` of ``col`` itself
    would sort or partition it again)."""
    return _sorted_thresholds(np.sort(col), max_bins, _quantile_levels(max_bins))


def _column_thresholds(col: np.ndarray, max_bins: int, q: np.ndarray) -> np.ndarray:
    """:func:`_thresholds` of the values of ``col`` that are not NaN (``q``:
    :func:`_quantile_levels`): the values copied out by a kernel and sorted in place
    (``np.sort``'s algorithm on the same values)."""
    s = _not_nan(col)
    s.sort()
    return _sorted_thresholds(s, max_bins, q)


@njit(cache=True, nogil=True)
def _not_nan(col):
    """The values of ``col`` that are not NaN, in order (``col[~np.isnan(col)]``)."""
    out = np.empty(col.shape[0])
    m = 0
    for i in range(col.shape[0]):
        v = col[i]
        out[m] = v
        m += np.int64(not np.isnan(v))
    return out[:m]


@njit(cache=True, nogil=True)
def _sorted_thresholds(s, max_bins, q):
    """The thresholds of the sorted values ``s`` (no NaN) as numpy computes them: the
    distinct values ``u`` (the first of each run), midpoints ``(u[k] + u[k + 1]) / 2`` (or
    ``u[k + 1]`` where the midpoint rounds onto ``u[k]``); with more than ``max_bins``
    distinct values only the midpoints at ``searchsorted(u, v, "left")`` of the quantiles
    ``v = s[floor((n - 1) q)]`` (``np.quantile(..., method="lower")`` at ``q``), each once,
    in order, those below ``len(u) - 1``."""
    n = s.shape[0]
    u = np.empty(n)
    m = 0
    for i in range(n):
        if i == 0 or s[i] != s[i - 1]:
            u[m] = s[i]
            m += 1
    if m <= 1:
        return np.empty(0)
    mids = np.empty(m - 1)
    for k in range(m - 1):
        v = (u[k] + u[k + 1]) / 2.0
        mids[k] = v if v > u[k] else u[k + 1]
    if m <= max_bins:
        return mids
    out = np.empty(q.shape[0])
    c = 0
    last = -1
    for t in range(q.shape[0]):
        v = s[np.int64(np.floor((n - 1) * q[t]))]
        lo = 0  # first k with u[k] >= v
        hi = m
        while lo < hi:
            mid = (lo + hi) >> 1
            if u[mid] < v:
                lo = mid + 1
            else:
                hi = mid
        if lo != last and lo < m - 1:
            out[c] = mids[lo]
            c += 1
        last = lo
    return out[:c].copy()


@njit(cache=True, nogil=True)
def _level_codes(col, nb, out):
    """``out[i]``: the level code ``col[i]`` (truncated to an integer, as ``astype``), or
    ``nb`` (the missing code) where it is NaN, negative or ``>= nb``."""
    for i in range(col.shape[0]):
        v = col[i]
        if np.isnan(v) or v < 0 or v >= nb:
            out[i] = nb
        else:
            out[i] = np.int64(v)


@njit(cache=True, nogil=True, inline="always")
def _cell(v, a, s, top):
    """The grid cell of ``v``, ``floor((v - a) s)`` clamped to ``0..top`` (0 for NaN): a
    nondecreasing function of ``v`` (float subtraction and multiplication are monotone)."""
    x = (v - a) * s
    if not (x > 0.0):
        return 0
    if x >= top:
        return np.int64(top)
    return np.int64(x)


@njit(cache=True, nogil=True)
def _bin_codes(col, thr, out):
    """``out[i]``: the number of thresholds ``thr`` (sorted) strictly below ``col[i]``
    (``np.searchsorted(thr, col, side="left")``), ``len(thr) + 1`` (the missing code) where
    ``col[i]`` is NaN. The thresholds' range is cut into ``G >= 4 len(thr)`` equal cells
    (:func:`_cell`) and ``first[c]`` counts the thresholds of the cells below ``c``: as the
    cell is nondecreasing in the value, a value of cell ``c`` has at least ``first[c]`` and
    at most ``first[c + 1]`` thresholds below it, and the count is found between the two
    (most cells hold none or one threshold; a crowded one is halved first), instead of a
    binary search over all thresholds per value."""
    m = thr.shape[0]
    G = 16
    while G < 4 * m:
        G *= 2
    a = thr[0] if m > 0 else 0.0
    span = thr[m - 1] - a if m > 0 else 0.0
    s = G / span if 0.0 < span < np.inf else 0.0  # (0: one cell)
    top = G - 1.0
    first = np.zeros(G + 1, np.int64)
    for k in range(m):
        first[_cell(thr[k], a, s, top) + 1] += 1
    for c in range(G):
        first[c + 1] += first[c]
    for i in range(col.shape[0]):
        v = col[i]
        c = _cell(v, a, s, top)
        lo = first[c]
        hi = first[c + 1]
        while hi - lo > 4:
            mid = (lo + hi) >> 1
            if thr[mid] < v:
                lo = mid + 1
            else:
                hi = mid
        while lo < hi and thr[lo] < v:
            lo += 1
        out[i] = m + 1 if np.isnan(v) else lo
