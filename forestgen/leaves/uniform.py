"""Uniform-in-cell leaves: ARF's ``family="unif"`` (piecewise-constant baseline), RFDE, DEF."""

from __future__ import annotations

import math

import numpy as np

from forestgen.leaves.base import (
    LeafModel,
    cell_bounds_to,
    numpy_dtype,
    torch_tensor,
)
from forestgen.leaves.stats import column_scale
from forestgen.leaves.truncnorm import finite_cell
from forestgen.registry import register


@register("leaf", "uniform")
class UniformLeaf(LeafModel):
    """Uniform density on the leaf cell; unbounded sides take the global range widened by
    ``epsilon / 2`` of it on each side (ARF spec §2.3). Points outside get density 0."""

    packed_form = "uniform"  # the fused walks read its arrays (LeafModel)
    packed_factors = frozenset({"point", "interval"})

    discrete = False
    fitted_arrays = ("lo_", "hi_", "count_")

    def __init__(self, *, epsilon: float = 0.0):
        self.epsilon = epsilon

    def fit(self, x, leaf, cell, weight=None):
        if self.epsilon < 0:
            raise ValueError(f"epsilon must be >= 0, got {self.epsilon}")
        ok = ~np.isnan(x)
        w = None if weight is None else np.asarray(weight, float)[ok]
        cnt = np.bincount(np.asarray(leaf)[ok], weights=w, minlength=len(cell.lower)).astype(float)
        return self._fit_counts(cnt, cell)

    def fit_stats(self, stats, cell):
        """Fit from merged :class:`MomentStats` (only the counts are used)."""
        if self.epsilon < 0:
            raise ValueError(f"epsilon must be >= 0, got {self.epsilon}")
        return self._fit_counts(np.asarray(stats.count, float), cell)

    def _fit_counts(self, cnt, cell):
        lo, hi = finite_cell(cell, "global", self.epsilon)
        width = hi - lo
        floor = 1e-9 * column_scale(cell.data_min, cell.data_max)  # relative to the spread
        bad = ~(width > floor)
        hi = np.where(bad, lo + floor, hi)
        self.lo_ = lo
        self.hi_ = hi
        self.count_ = cnt
        return self

    def check_param_arrays(self, arrays, n_leaves, n_levels):
        super().check_param_arrays(arrays, n_leaves, n_levels)
        lo, hi = arrays["lo_"], arrays["hi_"]
        if not (np.isfinite(lo).all() and np.isfinite(hi).all() and (lo < hi).all()):
            raise ValueError(f"{type(self).__name__}: cells need finite lo_ < hi_")

    def log_prob(self, leaf, x):
        lo, hi = self.lo_[leaf], self.hi_[leaf]
        out = np.where((x > lo) & (x <= hi), -np.log(hi - lo), -np.inf)
        return np.where(np.isnan(x), 0.0, out)

    def log_prob_interval(self, leaf, lo, hi):
        a = np.maximum(np.asarray(lo, float), self.lo_[leaf])
        b = np.minimum(np.asarray(hi, float), self.hi_[leaf])
        with np.errstate(divide="ignore"):
            return np.log(np.maximum(b - a, 0.0)) - np.log(self.hi_[leaf] - self.lo_[leaf])

    def sample(self, leaf, rng, lo=None, hi=None, levels=None):
        a, b = self.lo_[leaf], self.hi_[leaf]
        if lo is not None:
            a = np.maximum(a, lo)
        if hi is not None:
            b = np.minimum(b, hi)
        return a + (np.maximum(b, a) - a) * rng.random(len(leaf))

    def log_max_density(self, leaf):
        """Log of the density's maximum on the cell (constant there)."""
        return -np.log(self.hi_[leaf] - self.lo_[leaf])

    def mean(self, leaf):
        return 0.5 * (self.lo_[leaf] + self.hi_[leaf])

    def mean_interval(self, leaf, lo, hi):
        a = np.maximum(self.lo_[leaf], lo)
        b = np.minimum(self.hi_[leaf], hi)
        return 0.5 * (a + np.maximum(a, b))

    def torch_params(self, dtype, device):
        """One leaf-major table ``[L, 3]``: cell bounds and log density."""
        npdt = numpy_dtype(dtype)
        cols = [*cell_bounds_to(self.lo_, self.hi_, npdt),
                (-np.log(self.hi_ - self.lo_)).astype(npdt)]
        return {"table": torch_tensor(np.stack(cols, axis=1), dtype, device)}

    @staticmethod
    def torch_log_prob(params, leaf, x):
        import torch

        lo, hi, logd = params["table"][leaf].unbind(-1)
        return torch.where((x > lo) & (x <= hi), logd, torch.full_like(logd, -math.inf))

    def torch_sample_params(self, n_leaves, device):
        return {"lo": torch_tensor(self.lo_, "float64", device),
                "hi": torch_tensor(self.hi_, "float64", device)}

    @staticmethod
    def torch_sample(params, leaf, u):
        lo = params["lo"][leaf]
        return lo + (params["hi"][leaf] - lo) * u
