"""Mergeable per-leaf sufficient statistics of one column.

Leaf models that fit from these (:meth:`~forestgen.leaves.base.LeafModel.fit_stats`) can be
fitted from statistics computed on parts of a table and merged, e.g. over the partitions of a
Dask DataFrame (:mod:`forestgen.distributed`), without gathering the rows.

* :class:`MomentStats` (numeric columns): weighted count, mean and sum of squared deviations
  per leaf — merged with the pairwise update of Chan, Golub & LeVeque (1979) — plus the per-leaf
  minimum and maximum when asked for.
* :class:`LevelStats` (discrete columns): weighted level counts ``[L, k]``; merging adds them.

Counts, level counts, minima and maxima merge exactly; means and squared deviations merge up to
floating-point rounding (the order of the merges is fixed by the order of the parts).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit


@dataclass
class MomentStats:
    """Per-leaf ``count``, ``mean`` and ``m2`` (sum of squared deviations from the mean) of
    ``x / scale``; ``vmin``/``vmax`` (same units, NaN where a leaf has no value) or ``None``."""

    count: np.ndarray
    mean: np.ndarray
    m2: np.ndarray
    scale: float = 1.0
    vmin: np.ndarray | None = None
    vmax: np.ndarray | None = None

    @classmethod
    def from_pairs(cls, x: np.ndarray, leaf: np.ndarray, n_leaves: int, *, scale: float = 1.0,
                   weight: np.ndarray | None = None, minmax: bool = False) -> MomentStats:
        """Statistics of the (leaf, value) pairs; NaN values are skipped. Two passes (mean,
        then squared deviations) as :func:`~forestgen.leaves.base.leaf_stats`, on values shifted
        by one value of their leaf, so a leaf of equal values has exactly that mean and
        ``m2 = 0`` (unshifted, the rounded mean left an SD of ~1e-17 that passed for a spread)."""
        x, inv = _scaled(x, scale, minmax)
        leaf = _leaf_ids(leaf)
        # the kernel skips NaN values and reads unit weights as 1.0: no filtered copies
        w = np.empty((0, 0)) if weight is None else np.asarray(weight, float).reshape(1, -1)
        cnt, mean, m2 = _moments(x, leaf.reshape(1, -1), w, weight is None, n_leaves, inv)
        lo = hi = None
        if minmax:
            ok = ~np.isnan(x)
            x, leaf = x[ok], leaf[ok]
            lo = np.full(n_leaves, np.inf)
            hi = np.full(n_leaves, -np.inf)
            np.minimum.at(lo, leaf, x)
            np.maximum.at(hi, leaf, x)
            lo[np.isinf(lo)] = np.nan
            hi[np.isinf(hi)] = np.nan
        return cls(cnt, mean, m2, float(scale), lo, hi)

    @classmethod
    def from_column(cls, x: np.ndarray, leaves: np.ndarray, n_leaves: int, *,
                    scale: float = 1.0, weight: np.ndarray | None = None) -> MomentStats:
        """:meth:`from_pairs` of the pairs ``(x[i], leaves[t, i])`` (weights ``weight[t,
        i]``) taken tree by tree: the values ``x [n]`` of one column in the leaves ``[B, n]``
        of ``B`` trees, read in place (no copy of the values per tree). The same statistics,
        bit for bit, as :meth:`from_pairs` of ``np.tile(x, B)``, ``leaves.ravel()`` and
        ``weight.ravel()``."""
        x, inv = _scaled(x, scale, False)
        leaves = _leaf_ids(leaves)
        w = np.empty((0, 0)) if weight is None else np.asarray(weight, float)
        if leaves.ndim != 2 or leaves.shape[1] != len(x) or (
                weight is not None and w.shape != leaves.shape):
            raise ValueError(f"MomentStats.from_column: leaves [B, {len(x)}] and weights of "
                             f"their shape expected, got {leaves.shape} and {w.shape}")
        return cls(*_moments(x, leaves, w, weight is None, n_leaves, inv), float(scale))

    @property
    def var(self) -> np.ndarray:
        """Unbiased variance per leaf (NaN or inf where the count is below 2)."""
        with np.errstate(invalid="ignore", divide="ignore"):
            return self.m2 / (self.count - 1.0)

    def merge(self, other: MomentStats) -> MomentStats:
        """Statistics of the union of both parts' pairs."""
        if self.scale != other.scale or len(self.count) != len(other.count):
            raise ValueError("MomentStats to merge must share scale and number of leaves")
        na, nb = self.count, other.count
        n = na + nb
        with np.errstate(invalid="ignore", divide="ignore"):
            delta = other.mean - self.mean
            mean = np.where(nb == 0, self.mean, np.where(na == 0, other.mean,
                                                         self.mean + delta * (nb / n)))
            m2 = np.where((na == 0) | (nb == 0), self.m2 + other.m2,
                          self.m2 + other.m2 + delta * delta * (na * nb / n))
        lo = hi = None
        if self.vmin is not None and other.vmin is not None:
            lo = np.fmin(self.vmin, other.vmin)
            hi = np.fmax(self.vmax, other.vmax)
        return MomentStats(n, mean, m2, self.scale, lo, hi)


def _scaled(x: np.ndarray, scale: float, copy: bool) -> tuple[np.ndarray, float]:
    """``x`` as float64 and the factor the kernel reads it with: a power-of-two ``scale``
    as its reciprocal (``x / scale == x * (1 / scale)`` exactly: no scaled copy), else
    (or with ``copy``) a scaled copy and 1."""
    x = np.asarray(x, np.float64)
    if scale == 1.0:
        return x, 1.0
    if not copy and np.frexp(scale)[0] == 0.5 and np.isfinite(1.0 / scale):
        return x, 1.0 / scale
    return x / scale, 1.0


def _leaf_ids(leaf: np.ndarray) -> np.ndarray:
    """Leaf ids as the kernel reads them: int32 (a forest's) as they are, else int64."""
    leaf = np.asarray(leaf)
    return leaf if leaf.dtype == np.int32 else leaf.astype(np.int64, copy=False)


@njit(cache=True, nogil=True, error_model="numpy")
def _moments(x, leaf, w, unit, n_leaves, inv):
    """Per-leaf weighted count, mean and ``m2`` of the non-NaN ``x * inv`` (``inv``: 1, or
    the reciprocal of a power of two, so the product is exact; every leaf id in
    ``0..n_leaves-1``; weights ``w``, or 1.0 each with ``unit``, which multiplies exactly).
    The pairs are ``(x[i], leaf[t, i])`` (weight ``w[t, i]``) in the order ``t`` then ``i``:
    ``leaf [1, N]`` for a list of pairs, ``leaf [B, n]`` for a column of ``n`` values in the
    leaves of ``B`` trees (:meth:`MomentStats.from_column`: no copy of the values per tree).
    The values are shifted by their leaf's last value, summed in pair order, then the
    squared deviations from the shifted mean; the operations (and bits) of the bincount
    formulation ``ref[leaf] = x; cnt, s1 = bincount(w), bincount(w * xs); m2 = bincount(w *
    dev * dev)`` in linear passes without temporaries. A leaf's running sums share one cache
    line (``acc[leaf] = ref, count, s1 then shift, m2``)."""
    acc = np.zeros((n_leaves, 4))
    B, n = leaf.shape
    for t in range(B):
        for i in range(n):
            if not np.isnan(x[i]):
                acc[leaf[t, i], 0] = x[i] * inv
    for t in range(B):
        for i in range(n):
            if np.isnan(x[i]):
                continue
            j = leaf[t, i]
            wi = 1.0 if unit else w[t, i]
            acc[j, 1] += wi
            acc[j, 2] += wi * (x[i] * inv - acc[j, 0])
    cnt = np.empty(n_leaves)
    mean = np.empty(n_leaves)
    for j in range(n_leaves):
        cnt[j] = acc[j, 1]
        acc[j, 2] = acc[j, 2] / acc[j, 1]  # the shift; IEEE: NaN in a leaf without pairs
        mean[j] = acc[j, 0] + acc[j, 2]
    for t in range(B):
        for i in range(n):
            if np.isnan(x[i]):
                continue
            j = leaf[t, i]
            dev = (x[i] * inv - acc[j, 0]) - acc[j, 2]
            acc[j, 3] += (1.0 if unit else w[t, i]) * dev * dev
    return cnt, mean, acc[:, 3].copy()


@dataclass
class LevelStats:
    """Per-leaf weighted counts of the level codes ``0..k-1``, ``counts [L, k]``."""

    counts: np.ndarray

    @classmethod
    def from_pairs(cls, x: np.ndarray, leaf: np.ndarray, n_leaves: int, n_levels: int, *,
                   weight: np.ndarray | None = None) -> LevelStats:
        """Counts of the (leaf, code) pairs; NaN values and codes outside ``0..k-1`` are
        skipped."""
        k = max(int(n_levels), 1)
        x = np.asarray(x, np.float64)
        ok = ~np.isnan(x)
        codes = x[ok].astype(np.int64)
        lv = np.asarray(leaf)[ok].astype(np.int64)
        keep = (codes >= 0) & (codes < k)
        w = None if weight is None else np.asarray(weight, float)[ok][keep]
        c = np.bincount(lv[keep] * k + codes[keep], weights=w, minlength=n_leaves * k)
        return cls(c.astype(np.float64, copy=False).reshape(n_leaves, k))

    def merge(self, other: LevelStats) -> LevelStats:
        if self.counts.shape != other.counts.shape:
            raise ValueError("LevelStats to merge must have the same shape")
        return LevelStats(self.counts + other.counts)


@dataclass
class AtomStats:
    """A numeric column with point masses at ``atoms`` (encoded units): per-leaf weighted
    counts at each atom, ``counts [L, A]``, and :class:`MomentStats` of the other values
    (``rest``), as :class:`~forestgen.leaves.point_mass.PointMassLeaf` is fitted."""

    counts: np.ndarray
    rest: MomentStats

    @classmethod
    def from_pairs(cls, x: np.ndarray, leaf: np.ndarray, n_leaves: int, atoms, *,
                   scale: float = 1.0, weight: np.ndarray | None = None,
                   minmax: bool = False) -> AtomStats:
        """Statistics of the (leaf, value) pairs; NaN values are skipped."""
        x = np.asarray(x, np.float64)
        leaf = np.asarray(leaf, np.int64)
        w = np.ones(len(x)) if weight is None else np.asarray(weight, float)
        counts = np.zeros((n_leaves, len(atoms)))
        on_atom = np.zeros(len(x), bool)
        for a, v in enumerate(atoms):
            sel = x == v
            on_atom |= sel
            counts[:, a] = np.bincount(leaf[sel], weights=w[sel], minlength=n_leaves)
        rest = MomentStats.from_pairs(np.where(on_atom, np.nan, x), leaf, n_leaves, scale=scale,
                                      weight=weight, minmax=minmax)
        return cls(counts, rest)

    @property
    def total(self) -> np.ndarray:
        """Weighted count of non-missing values per leaf."""
        return self.rest.count + self.counts.sum(axis=1)

    def merge(self, other: AtomStats) -> AtomStats:
        if self.counts.shape != other.counts.shape:
            raise ValueError("AtomStats to merge must have the same shape")
        return AtomStats(self.counts + other.counts, self.rest.merge(other.rest))


@dataclass
class ForestStats:
    """Everything a leaf mixture's leaves are fitted from, for one forest and a set of rows:
    ``coverage [L]`` (rows per leaf; a row counts once in each tree), per-column
    :class:`MomentStats` / :class:`LevelStats` (``columns``), and for the columns
    ``missing_cols`` the rows per leaf missing each, ``missing [L, len(missing_cols)]``."""

    coverage: np.ndarray
    columns: list
    missing_cols: np.ndarray
    missing: np.ndarray

    @staticmethod
    def plan(schema) -> list[tuple]:
        """Per column of ``schema``: ``("levels", k)``, ``("moments", column scale)`` or, for a
        numeric column with point masses, ``("atoms", column scale, atoms)``."""
        def one(c):
            if c.is_discrete:
                return ("levels", float(c.n_levels))
            scale = column_scale(c.lower, c.upper)
            return ("atoms", scale, tuple(c.atoms)) if c.atoms else ("moments", scale)

        return [one(c) for c in schema.columns]

    @classmethod
    def from_leaves(cls, Z: np.ndarray, leaves: np.ndarray, n_leaves: int,
                    plan: list[tuple], missing_cols: np.ndarray) -> ForestStats:
        """Statistics of encoded rows ``Z [n, d]`` that fall in ``leaves [n, B]``."""
        B = leaves.shape[1]
        flat = leaves.ravel()
        cover = np.bincount(flat, minlength=n_leaves).astype(np.float64)
        cols: list = []
        for j, (kind, arg, *atoms) in enumerate(plan):
            x = np.repeat(Z[:, j], B)
            if kind == "levels":
                cols.append(LevelStats.from_pairs(x, flat, n_leaves, int(arg)))
            elif kind == "atoms":
                cols.append(AtomStats.from_pairs(x, flat, n_leaves, atoms[0], scale=arg,
                                                 minmax=True))
            else:
                cols.append(MomentStats.from_pairs(x, flat, n_leaves, scale=arg, minmax=True))
        miss = np.zeros((n_leaves, len(missing_cols)))
        for k, j in enumerate(missing_cols):
            miss[:, k] = np.bincount(flat, weights=np.repeat(np.isnan(Z[:, j]), B),
                                     minlength=n_leaves)
        return cls(cover, cols, np.asarray(missing_cols, np.int64), miss)

    def merge(self, other: ForestStats) -> ForestStats:
        """Statistics of both sets of rows."""
        if not np.array_equal(self.missing_cols, other.missing_cols):
            raise ValueError("ForestStats to merge must track the same missing columns")
        return ForestStats(self.coverage + other.coverage,
                           [a.merge(b) for a, b in zip(self.columns, other.columns)],
                           self.missing_cols, self.missing + other.missing)


def column_scale(data_min: float, data_max: float) -> float:
    """A power of two close to the column's spread (its magnitude if constant, 1 if zero).

    Leaf models fit in units of this scale, so floors are relative to the data and squares of
    1e-300 or 1e+300 values neither underflow nor overflow; dividing by a power of two is
    exact, so on ordinary data the fitted parameters are unchanged.
    """
    lo, hi = float(data_min), float(data_max)
    spread = hi - lo
    if not (np.isfinite(spread) and spread > 0):
        spread = max(abs(lo), abs(hi))
    if not (np.isfinite(spread) and spread > 0):
        return 1.0
    return float(np.ldexp(1.0, int(np.frexp(spread)[1]) - 1))
