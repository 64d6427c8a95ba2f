"""Smoothed categorical leaves over the levels a leaf's cell allows (ARF spec §2.3, pitfall 9).

``p(v) = (c_v + alpha) / (N + alpha * k_allowed)`` for allowed levels, 0 for excluded ones. A
leaf with no rows and ``alpha = 0`` falls back to uniform over its allowed levels.
"""

from __future__ import annotations

import numpy as np
from numba import prange

from forestgen.leaves.base import LeafModel, torch_tensor
from forestgen.parallel import parallel_kernel
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
    fitted_arrays = ("pmf_", "count_")

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
        w = None if weight is None else np.asarray(weight, float)[ok][keep]
        # one [L, k] table, updated in place: counts -> smoothed counts -> pmf
        pmf = np.bincount(lv[keep] * k + codes[keep], weights=w, minlength=L * k)
        pmf = pmf.astype(np.float64, copy=False).reshape(L, k)
        if cell.allowed is not None:
            pmf *= cell.allowed
        self.count_ = pmf.sum(1)
        if self.alpha > 0:
            pmf += self.alpha * (cell.allowed if cell.allowed is not None else 1.0)
        tot = pmf.sum(1)
        empty = tot <= 0
        if empty.any():
            # no rows and no smoothing: uniform over the allowed levels (over all if none is)
            allowed = (np.ones((int(empty.sum()), k), bool) if cell.allowed is None
                       else cell.allowed[empty])
            n_allowed = allowed.sum(1, keepdims=True)
            pmf[empty] = np.where(n_allowed > 0, allowed / np.maximum(n_allowed, 1), 1.0 / k)
            tot[empty] = 1.0
        pmf /= tot[:, None]
        self.pmf_ = pmf
        return self

    def param_arrays(self):
        return {"pmf_": self.pmf_, "count_": self.count_}

    def check_param_arrays(self, arrays, n_leaves, n_levels):
        super().check_param_arrays(arrays, n_leaves, n_levels)
        pmf = arrays["pmf_"]
        k = max(int(n_levels), 1)
        if pmf.ndim != 2 or pmf.shape[1] != k or pmf.dtype.kind != "f":
            raise ValueError(f"{type(self).__name__}.pmf_ must be a float [{n_leaves}, {k}] "
                             f"table for a column with {k} levels, got {pmf.dtype} {pmf.shape}")
        if not (np.isfinite(pmf).all() and (pmf >= 0).all()):
            raise ValueError(f"{type(self).__name__}.pmf_ must be finite and >= 0")

    @property
    def n_levels(self) -> int:
        return self.pmf_.shape[1]

    def log_prob(self, leaf, x):
        return _categorical_log_prob(self.pmf_, np.asarray(leaf, np.int64),
                                     np.asarray(x, np.float64), float(self.floor))

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
        lv = None if levels is None else np.asarray(levels, bool)
        step = max(1, 2_000_000 // k)
        for s in range(0, m, step):
            sl = slice(s, s + step)
            p = self.pmf_[leaf[sl]]
            if lv is not None:
                p = p * (lv[sl] if lv.ndim == 2 else lv)
            cdf = np.cumsum(p, axis=1)
            # trailing zero-mass levels get exactly cdf[-1]: never drawn
            out[sl] = np.minimum((cdf < u[sl, None] * cdf[:, -1:]).sum(1), k - 1)
        return out

    def mean(self, leaf):
        return self.pmf_[leaf] @ np.arange(self.n_levels, dtype=float)

    def torch_params(self, dtype, device):
        with np.errstate(divide="ignore"):
            tab = np.log(np.maximum(self.pmf_, self.floor)) if self.floor > 0 \
                else np.log(self.pmf_)
        bad = np.log(self.floor) if self.floor > 0 else -np.inf
        return {"table": torch_tensor(tab, dtype, device),
                "bad": torch_tensor(np.asarray(bad), dtype, device)}

    @staticmethod
    def torch_log_prob(params, leaf, x):
        import torch

        tab = params["table"]
        k = tab.shape[1]
        x = x.detach()
        valid = (x >= 0) & (x < k) & (x == torch.floor(x))
        code = torch.where(valid, x, torch.zeros_like(x)).long()
        t = tab[leaf, code]
        return torch.where(valid, t, params["bad"].expand(t.shape))


@parallel_kernel
def _categorical_log_prob(pmf, leaf, x, floor):
    """log pmf[leaf, x]; NaN -> 0 (marginalised); codes outside 0..k-1 or non-integer -> floor."""
    k = pmf.shape[1]
    out = np.empty(x.shape[0])
    log_floor = np.log(floor) if floor > 0 else -np.inf
    for i in prange(x.shape[0]):
        v = x[i]
        if np.isnan(v):
            out[i] = 0.0
        else:
            c = int(v)
            p = pmf[leaf[i], c] if (c == v and 0 <= c < k) else 0.0
            out[i] = np.log(p) if p > floor else log_floor
    return out
