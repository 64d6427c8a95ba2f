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
"""

from __future__ import annotations

import numpy as np

from forestgen.leaves.base import LEVEL_BUDGET
from forestgen.leaves.categorical import CategoricalLeaf
from forestgen.registry import register

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
    """

    def __init__(self, *, bandwidth: float = 0.5, alpha: float = 0.0, floor: float = 1e-20,
                 prior: float = 0.0):
        super().__init__(alpha=alpha, floor=floor, prior=prior)
        self.bandwidth = bandwidth

    def fit(self, x, leaf, cell, weight=None):
        if not 0 <= self.bandwidth < 1:
            raise ValueError(f"bandwidth must be in [0, 1), got {self.bandwidth}")
        super().fit(x, leaf, cell, weight)
        k = self.n_levels
        codes = np.asarray(x, float)
        codes = codes[~np.isnan(codes)].astype(np.int64)
        gap = np.bincount(codes[(codes >= 0) & (codes < k)], minlength=k) == 0
        if not gap.any():
            return self
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
        return self

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
