"""Uniform-over-allowed-levels leaves for discrete columns of RFDE and DEF.

Both methods put a leaf's mass uniformly on its cell with respect to a reference measure
(Wen & Hang 2022, eq. 4; Bravo 2025 §1.3-2.2): Lebesgue volume on numeric sides and the counting
measure on discrete ones. The pmf of a discrete column in a leaf is therefore
``1 / #allowed levels`` on the levels the cell allows and 0 elsewhere, independent of the data.
"""

from __future__ import annotations

import numpy as np

from forestgen.leaves.categorical import CategoricalLeaf
from forestgen.registry import register


@register("leaf", "uniform_levels")
class UniformLevelsLeaf(CategoricalLeaf):
    """Uniform pmf over the levels each leaf cell allows (counting reference measure).

    ``floor`` (default 0: an excluded level has log-probability ``-inf``) only affects
    :meth:`log_prob`; the learners apply their own density floor. All query methods are those
    of :class:`CategoricalLeaf` over the fixed pmf.
    """

    def __init__(self, *, floor: float = 0.0):
        super().__init__(alpha=0.0, floor=floor)

    def get_params(self) -> dict:
        return {"floor": self.floor}

    def fit(self, x, leaf, cell, weight=None):
        if not 0 <= self.floor < 1:
            raise ValueError(f"floor must be in [0, 1), got {self.floor}")
        L, k = len(cell.lower), max(int(cell.n_levels), 1)
        allowed = np.ones((L, k), bool) if cell.allowed is None else np.asarray(cell.allowed, bool)
        cnt = allowed.sum(1)
        ok = ~np.isnan(x)
        w = np.ones(int(ok.sum())) if weight is None else np.asarray(weight, float)[ok]
        self.count_ = np.bincount(np.asarray(leaf)[ok].astype(np.int64), weights=w,
                                  minlength=L).astype(np.float64)
        # no listed levels: every allowed level has the leaf's shared probability rest_
        self._set(np.zeros(L + 1, np.int64), np.zeros(0, np.int32), np.zeros(0),
                  np.where(cnt > 0, 1.0 / np.maximum(cnt, 1), 0.0), allowed)
        return self

    def log_max_density(self, leaf):
        """Log of the largest level probability in each leaf (``-log #allowed levels``)."""
        with np.errstate(divide="ignore"):
            return np.log(self.probs(leaf).max(axis=1))
