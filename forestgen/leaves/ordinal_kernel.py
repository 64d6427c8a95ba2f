"""Ordered integer levels with the gaps of the training data filled (Wang & van Ryzin 1981).

A dense integer column has a level for every integer of its range, including integers no
training row holds (a rating scale where nobody answered 5). Their empirical probability is 0 in
every leaf, so a new row holding one scored at the pmf floor (about -46 nats). This leaf gives
each such *gap level* the mass the ordered discrete kernel ``K(v, x) = (1 - lam) / 2 *
lam ** |v - x|`` carries to it from the leaf's rows (restricted to the levels the cell allows;
all gaps together take at most 5% of the leaf), then renormalises: a gap scores within a few
nats of its neighbours instead of at the floor, while the levels seen in training keep at least
95% of their shares (spikes such as a 40-hour week are not smoothed away).

Storage stays that of :class:`~forestgen.leaves.categorical.CategoricalLeaf`: a leaf lists the
levels seen in it and the gap levels that received mass; its other allowed levels keep the
shared prior share ``rest_ * base_`` (renormalised), so a marginal prior, which gives every
allowed level mass, costs no dense leaf x level table.

``tail > 0`` mixes each leaf's pmf with the rounded normal fitted to its own rows
(:mod:`~forestgen.leaves.rounded_normal`, R arf's shape), so the integers next to the few a
small leaf saw get a real share, not only the prior's.
"""

from __future__ import annotations

import numpy as np

from forestgen.leaves.base import LEVEL_BUDGET
from forestgen.leaves.categorical import CategoricalLeaf
from forestgen.leaves.rounded_normal import (
    TAIL_ARRAYS,
    check_tail_arrays,
    fit_tail,
    tail_dense_rows,
    tail_level_mass,
    tail_log_prob,
    tail_mean,
    tail_sample,
)
from forestgen.registry import register
from forestgen.validation import check_real

#: the largest share of a leaf's mass the gap levels receive
MAX_GAP_SHARE = 0.05


def ordinal_kernel_smooth(pmf: np.ndarray, lam: float) -> np.ndarray:
    """``pmf [L, k]`` convolved along levels with the Wang-van Ryzin kernel of ``lam``
    (two geometric passes, O(L k))."""
    if lam <= 0:
        return pmf.copy()
    k = pmf.shape[1]
    fwd = pmf.copy()
    bwd = pmf.copy()
    for i in range(1, k):
        fwd[:, i] += lam * fwd[:, i - 1]
    for i in range(k - 2, -1, -1):
        bwd[:, i] += lam * bwd[:, i + 1]
    # sum_{d >= 1} lam^d (c[i - d] + c[i + d]) = (fwd - c) + (bwd - c)
    return (1.0 - lam) * (pmf + 0.5 * (fwd + bwd - 2.0 * pmf))


@register("leaf", "ordinal_kernel")
class OrdinalKernelLeaf(CategoricalLeaf):
    """Per-leaf pmf over ordered integer levels, smoothed with the ordered kernel.

    Parameters
    ----------
    bandwidth : ``lam`` in ``[0, 1)`` (default 0.5): a gap level at distance 1 from a level
        gets ``(1 - lam) lam / 2`` of that level's weight; 0 is the plain empirical pmf.
    alpha, prior, floor : as in :class:`~forestgen.leaves.categorical.CategoricalLeaf`
        (applied before the kernel).
    tail : pseudo-count ``c >= 0`` (default 0: none) of the rounded-normal component: a leaf
        of ``N`` rows gives it weight ``c / (N + c)`` (:mod:`~forestgen.leaves.rounded_normal`).
    """

    def __init__(self, *, bandwidth: float = 0.5, alpha: float = 0.0, floor: float = 1e-20,
                 prior: float = 0.0, tail: float = 0.0):
        super().__init__(alpha=alpha, floor=floor, prior=prior)
        self.bandwidth = bandwidth
        self.tail = tail

    def fit(self, x, leaf, cell, weight=None):
        if not 0 <= self.bandwidth < 1:
            raise ValueError(f"bandwidth must be in [0, 1), got {self.bandwidth}")
        check_real("tail", self.tail, 0.0, np.inf, high_open=True)
        for nm in TAIL_ARRAYS:  # a refit starts without the component
            setattr(self, nm, None)
        super().fit(x, leaf, cell, weight)
        self._fill_gaps(x, cell)
        if self.tail > 0:
            self._fit_tail(x, leaf, weight)
        return self

    def _fit_tail(self, x, leaf, weight) -> None:
        k = self.n_levels
        allowed = np.unpackbits(self.allowed_, axis=1, count=k, bitorder="little").astype(bool)
        x = np.asarray(x, float)
        ok = ~np.isnan(x)
        codes, lv = x[ok].astype(np.int64), np.asarray(leaf)[ok].astype(np.int64)
        w = None if weight is None else np.asarray(weight, float)[ok]
        keep = (codes >= 0) & (codes < k)
        keep[keep] = allowed[lv[keep], codes[keep]]  # rows outside the leaf's cell: no mass
        if w is not None:
            keep &= w > 0
        arrays = fit_tail(codes[keep].astype(float), lv[keep], None if w is None else w[keep],
                          allowed, float(self.tail))
        if arrays["tail_w_"].any():
            for nm, v in arrays.items():
                setattr(self, nm, v)

    def _fill_gaps(self, x, cell) -> None:
        k = self.n_levels
        codes = np.asarray(x, float)
        codes = codes[~np.isnan(codes)].astype(np.int64)
        gap = np.bincount(codes[(codes >= 0) & (codes < k)], minlength=k) == 0
        if not gap.any():
            return
        # dense [rows, k] blocks of a fixed budget while smoothing (leaves are independent);
        # stored sparse again: the leaf's listed levels and its gap levels with mass are listed,
        # its other allowed levels keep the shared prior share rest_ * base_ (renormalised)
        L = len(self.rest_)
        step = max(1, LEVEL_BUDGET // k)
        seg = np.repeat(np.arange(L), np.diff(self.offset_))
        offset, codes_out, probs_out = [np.zeros(1, np.int64)], [], []
        rest = self.rest_.copy()
        for s in range(0, L, step):
            e = min(L, s + step)
            pmf, tot = self._smoothed(s, e, gap, cell.allowed)
            keep = gap[None, :] & (pmf > 0)
            a, b = self.offset_[s], self.offset_[e]
            keep[seg[a:b] - s, self.code_[a:b]] = True
            e_leaf, e_code = np.nonzero(keep)
            offset.append(np.searchsorted(e_leaf, np.arange(1, e - s + 1)) + offset[-1][-1])
            codes_out.append(e_code)
            probs_out.append(pmf[e_leaf, e_code])
            rest[s:e] = np.where(tot > 0, rest[s:e] / np.where(tot > 0, tot, 1.0), rest[s:e])
        self.offset_ = np.concatenate(offset).astype(np.int64)
        self.code_ = np.concatenate(codes_out).astype(np.int32)
        self.prob_ = np.concatenate(probs_out).astype(np.float64)
        self.rest_ = rest

    # --------------------------------------------------------------- the rounded-normal tail
    @property
    def _has_tail(self) -> bool:
        return getattr(self, "tail_w_", None) is not None

    def _tail_tables(self):
        return (*self._tables(), *(getattr(self, nm) for nm in TAIL_ARRAYS))

    def param_arrays(self):
        out = super().param_arrays()
        if self._has_tail:
            out.update({nm: getattr(self, nm) for nm in TAIL_ARRAYS})
        return out

    def set_param_arrays(self, arrays):
        arrays = dict(arrays)
        tail = {nm: arrays.pop(nm) for nm in TAIL_ARRAYS if nm in arrays}
        super().set_param_arrays(arrays)
        for nm in TAIL_ARRAYS:
            setattr(self, nm, np.asarray(tail[nm], np.float64) if tail else None)
        return self

    def check_param_arrays(self, arrays, n_leaves, n_levels):
        tail = [nm for nm in TAIL_ARRAYS if nm in arrays]
        if tail and len(tail) != len(TAIL_ARRAYS):
            raise ValueError(f"{type(self).__name__} needs all of {list(TAIL_ARRAYS)} or none, "
                             f"got {tail}")
        super().check_param_arrays({k: v for k, v in arrays.items() if k not in TAIL_ARRAYS},
                                   n_leaves, n_levels)
        if tail:
            check_tail_arrays(type(self).__name__, arrays, n_leaves)

    def log_prob(self, leaf, x):
        if not self._has_tail:
            return super().log_prob(leaf, x)
        return tail_log_prob(*self._tail_tables(), np.asarray(leaf, np.int64),
                             np.asarray(x, np.float64), self.n_levels, float(self.floor))

    def log_prob_levels(self, leaf, levels):
        if not self._has_tail:
            return super().log_prob_levels(leaf, levels)
        levels = np.asarray(levels, bool)
        lv2 = levels[None, :] if levels.ndim == 1 else levels
        p = tail_level_mass(*self._tail_tables(), np.asarray(leaf, np.int64),
                            np.ascontiguousarray(lv2), levels.ndim == 1)
        with np.errstate(divide="ignore"):
            return np.log(p)

    def probs(self, leaf):
        if not self._has_tail:
            return super().probs(leaf)
        return tail_dense_rows(*self._tail_tables(), np.asarray(leaf, np.int64), self.n_levels)

    def mean(self, leaf):
        if not self._has_tail:
            return super().mean(leaf)
        return tail_mean(*self._tail_tables(), np.asarray(leaf, np.int64), self.n_levels)

    def support_size(self) -> np.ndarray:
        if not self._has_tail:
            return super().support_size()
        L, k = len(self.rest_), self.n_levels
        step = max(1, LEVEL_BUDGET // k)
        return np.concatenate([(self.probs(np.arange(s, min(L, s + step))) > 0).sum(1)
                               for s in range(0, L, step)] or [np.zeros(0)]).astype(np.int64)

    def sample(self, leaf, rng, lo=None, hi=None, levels=None):
        if not self._has_tail:
            return super().sample(leaf, rng, lo, hi, levels)
        u = rng.random(len(leaf))
        k = self.n_levels
        lv = np.ones((1, k), bool) if levels is None else np.asarray(levels, bool)
        shared = lv.ndim == 1 or levels is None
        lv = np.ascontiguousarray(lv[None, :] if lv.ndim == 1 else lv)
        return tail_sample(*self._tail_tables(), np.asarray(leaf, np.int64), u, lv, shared, k)

    def _smoothed(self, s: int, e: int, gap: np.ndarray, allowed: np.ndarray | None
                  ) -> tuple[np.ndarray, np.ndarray]:
        """The gap-filled, renormalised pmf of leaves ``s:e`` as a dense ``[e - s, k]`` and
        each leaf's mass before renormalising ``[e - s]``."""
        base = self.probs(np.arange(s, e))
        fill = np.where(gap[None, :], ordinal_kernel_smooth(base, float(self.bandwidth)),
                        0.0)
        allowed = None if allowed is None else allowed[s:e]
        if allowed is not None:
            fill *= allowed
        # the gaps take at most MAX_GAP_SHARE of a leaf: seen levels keep >= 95% of their share
        total = fill.sum(1, keepdims=True)
        fill *= np.minimum(1.0, MAX_GAP_SHARE / np.maximum(total, 1e-300))
        pmf = base + fill
        if allowed is not None:
            pmf *= allowed
        tot = pmf.sum(1, keepdims=True)
        return np.where(tot > 0, pmf / np.where(tot > 0, tot, 1.0), base), tot[:, 0]
