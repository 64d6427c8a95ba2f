"""Kernel-smoothed pmf for ordered integer levels (Wang & van Ryzin 1981).

A leaf's empirical pmf ``c_x / N`` over the levels its cell allows is smoothed with the ordered
discrete kernel ``K(v, x) = 1 - lam`` for ``v = x`` and ``(1 - lam) / 2 * lam ** |v - x|``
otherwise, then restricted to the allowed levels and renormalised. An integer the leaf has not
seen thus keeps a probability close to its neighbours' (``lam / 2`` of a neighbour's weight at
distance 1) instead of zero, while a pmf over wide ranges (ages 17..90) stays local: unlike
additive smoothing, no mass is spread to distant levels.
"""

from __future__ import annotations

import numpy as np

from forestgen.leaves.categorical import CategoricalLeaf
from forestgen.registry import register


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
    bandwidth : ``lam`` in ``[0, 1)`` (default 0.2): the weight an unseen level at distance 1
        gets is ``lam / 2`` of its neighbour's; 0 is the plain empirical pmf.
    alpha, floor : as in :class:`~forestgen.leaves.categorical.CategoricalLeaf` (applied
        before the kernel).
    """

    def __init__(self, *, bandwidth: float = 0.2, alpha: float = 0.0, floor: float = 1e-20):
        super().__init__(alpha=alpha, floor=floor)
        self.bandwidth = bandwidth

    def fit(self, x, leaf, cell, weight=None):
        if not 0 <= self.bandwidth < 1:
            raise ValueError(f"bandwidth must be in [0, 1), got {self.bandwidth}")
        super().fit(x, leaf, cell, weight)
        pmf = ordinal_kernel_smooth(self.pmf_, float(self.bandwidth))
        if cell.allowed is not None:
            pmf *= cell.allowed
        tot = pmf.sum(1, keepdims=True)
        self.pmf_ = np.where(tot > 0, pmf / np.where(tot > 0, tot, 1.0), self.pmf_)
        return self
