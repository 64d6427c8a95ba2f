"""Smoothed categorical leaves over the levels a leaf's cell allows (ARF spec §2.3, pitfall 9).

``p(v) = (c_v + alpha) / (N + alpha * k_allowed)`` for allowed levels, 0 for excluded ones. A
leaf with no rows and ``alpha = 0`` falls back to uniform over its allowed levels.
"""

from __future__ import annotations

import numpy as np

from forestgen.leaves.base import LeafModel
from forestgen.registry import register


@register("leaf", "categorical")
class CategoricalLeaf(LeafModel):
    """Per-leaf pmf over level codes ``0..k-1``.

    Parameters
    ----------
    alpha : additive (Laplace) smoothing over the allowed levels (R arf default 0).
    floor : probability reported by :meth:`log_prob` for a level with zero mass (R arf's
        ``1e-20``, about -46 nats), so one unseen level does not make a test row -inf; set
        ``floor=0`` for the honest ``-inf``. Sampling and conditioning use the exact pmf.
    """

    discrete = True

    def __init__(self, *, alpha: float = 0.0, floor: float = 1e-20):
        self.alpha = alpha
        self.floor = floor

    def fit(self, x, leaf, cell, weight=None):
        if self.alpha < 0:
            raise ValueError(f"alpha must be >= 0, got {self.alpha}")
        if not 0 <= self.floor < 1:
            raise ValueError(f"floor must be in [0, 1), got {self.floor}")
        L, k = len(cell.lower), max(int(cell.n_levels), 1)
        ok = ~np.isnan(x)
        codes = x[ok].astype(np.int64)
        lv = leaf[ok].astype(np.int64)
        keep = (codes >= 0) & (codes < k)
        w = np.ones(len(codes)) if weight is None else np.asarray(weight, float)[ok]
        counts = np.bincount(lv[keep] * k + codes[keep], weights=w[keep],
                             minlength=L * k).reshape(L, k)
        allowed = np.ones((L, k), bool) if cell.allowed is None else cell.allowed
        counts = counts * allowed
        num = counts + self.alpha * allowed
        tot = num.sum(1, keepdims=True)
        n_allowed = allowed.sum(1, keepdims=True)
        # a cell that admits no seen level (reachable only by unseen/missing codes): uniform
        uni = np.where(n_allowed > 0, allowed / np.maximum(n_allowed, 1), 1.0 / k)
        with np.errstate(invalid="ignore", divide="ignore"):
            pmf = np.where(tot > 0, num / tot, uni)
        self.pmf_ = pmf
        self.count_ = counts.sum(1)
        self._finish()
        return self

    def _finish(self):
        cdf = np.cumsum(self.pmf_, axis=1)
        self.cdf_ = cdf / cdf[:, -1:]  # trailing zero-mass levels get exactly 1.0: never drawn

    def set_param_arrays(self, arrays):
        super().set_param_arrays(arrays)
        self._finish()
        return self

    def param_arrays(self):
        return {"pmf_": self.pmf_, "count_": self.count_}

    @property
    def n_levels(self) -> int:
        return self.pmf_.shape[1]

    def log_prob(self, leaf, x):
        k = self.n_levels
        nan = np.isnan(x)
        code = np.where(nan, 0, x)
        valid = (code >= 0) & (code < k) & (code == np.round(code))
        c = np.where(valid, code, 0).astype(np.int64)
        p = np.where(valid, self.pmf_[leaf, c], 0.0)
        with np.errstate(divide="ignore"):
            out = np.log(np.maximum(p, self.floor)) if self.floor > 0 else np.log(p)
        return np.where(nan, 0.0, out)

    def log_prob_levels(self, leaf, levels):
        levels = np.asarray(levels, bool)
        p = (self.pmf_[leaf] * levels).sum(1)
        with np.errstate(divide="ignore"):
            return np.log(p)

    def probs(self, leaf):
        return self.pmf_[leaf]

    def sample(self, leaf, rng, lo=None, hi=None, levels=None):
        m = len(leaf)
        u = rng.random(m)
        out = np.empty(m)
        k = self.n_levels
        step = max(1, 4_000_000 // k)
        for s in range(0, m, step):
            sl = slice(s, s + step)
            if levels is None:
                cdf = self.cdf_[leaf[sl]]
            else:
                lv = np.asarray(levels, bool)
                p = self.pmf_[leaf[sl]] * (lv[sl] if lv.ndim == 2 else lv)
                cdf = np.cumsum(p, axis=1)
                cdf /= cdf[:, -1:]
            out[sl] = np.minimum((cdf < u[sl, None]).sum(1), k - 1)
        return out

    def mean(self, leaf):
        return self.pmf_[leaf] @ np.arange(self.n_levels, dtype=float)
