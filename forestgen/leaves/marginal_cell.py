"""The column's marginal density restricted to each leaf cell (GF.Boost's ``cells="marginal"``).

One histogram of the column over the root box (bin ``edges`` and the cumulative probability
``cdf`` at each edge: a piecewise-linear CDF ``F``) is shared by all leaves; leaf ``l`` with the
finite cell ``(lo_l, hi_l]`` has the density ``f(x) / (F(hi_l) - F(lo_l))`` on its cell and 0
elsewhere. Where a cell lies inside one bin this is the uniform density on the cell; a wide cell
keeps the shape of the column's distribution instead of spreading its mass flat.
"""

from __future__ import annotations

import math

import numpy as np

from forestgen.leaves.base import (
    LeafModel,
    cell_bounds_to,
    edges_to,
    numpy_dtype,
    torch_tensor,
)
from forestgen.registry import register


@register("leaf", "marginal_cell")
class MarginalCellLeaf(LeafModel):
    """``f(x) / (F(hi) - F(lo))`` on each leaf's finite cell ``(lo, hi]`` (module docstring).

    ``edges`` (increasing, at least two) and ``cdf`` (strictly increasing from 0 to 1, one
    value per edge, so that ``F`` is invertible) are the histogram; ``fit`` takes the cells
    from ``cell.lower`` / ``cell.upper``, which must lie inside ``[edges[0], edges[-1]]``.
    Without ``edges`` (``None``), ``fit`` uses one bin spanning the cells (uniform leaves).
    """

    discrete = False
    handles_cells = frozenset({"empty"})  # finite cells of positive width only
    fitted_arrays = ("lo_", "hi_")

    def __init__(self, *, edges=None, cdf=None):
        self.edges = None if edges is None else [float(e) for e in edges]
        self.cdf = None if cdf is None else [float(c) for c in cdf]

    def get_params(self) -> dict:
        return {"edges": None if self.edges is None else list(self.edges),
                "cdf": None if self.cdf is None else list(self.cdf)}

    # ------------------------------------------------------------------ histogram
    def _hist(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(edges, cdf, bin densities)``, checked once per ``edges`` / ``cdf`` object (kept
        while they are the same objects: a new histogram is checked and cached anew)."""
        cache = getattr(self, "_hist_cache", None)
        if cache is not None and cache[0] is self.edges and cache[1] is self.cdf:
            return cache[2]
        out = self._check_hist()
        self._hist_cache = (self.edges, self.cdf, out)
        return out

    def _check_hist(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        e = np.asarray(self.edges, float)
        c = np.asarray(self.cdf, float)
        if (len(e) < 2 or len(c) != len(e) or not np.all(np.diff(e) > 0)
                or not np.all(np.diff(c) > 0) or c[0] != 0.0 or abs(c[-1] - 1.0) > 1e-9):
            raise ValueError("MarginalCellLeaf needs increasing edges and a strictly "
                             "increasing cdf from 0 to 1 of the same length")
        return e, c, np.diff(c) / np.diff(e)

    def _F(self, x) -> np.ndarray:
        e, c, _ = self._hist()
        return np.interp(np.asarray(x, float), e, c)

    def _mass(self, leaf) -> np.ndarray:
        return self._F(self.hi_[leaf]) - self._F(self.lo_[leaf])

    def _log_mass(self, leaf) -> np.ndarray:
        """``log _mass(leaf)``, from every leaf's value computed once per cells and histogram
        (the same numbers: ``F`` is evaluated elementwise); recomputed when ``lo_``, ``hi_``
        or the histogram are other objects (a fit, a load, ``set_param_arrays``)."""
        key = (self.lo_, self.hi_, self.edges, self.cdf)
        cache = getattr(self, "_log_mass_cache", None)
        if cache is None or any(a is not b for a, b in zip(cache[0], key)):
            with np.errstate(divide="ignore"):
                cache = (key, np.log(self._mass(np.arange(len(self.lo_)))))
            self._log_mass_cache = cache
        return cache[1][leaf]

    # ------------------------------------------------------------------ fit
    def fit(self, x, leaf, cell, weight=None):
        lo = np.asarray(cell.lower, float).copy()
        hi = np.asarray(cell.upper, float).copy()
        if not (np.isfinite(lo).all() and np.isfinite(hi).all()) or np.any(hi <= lo):
            raise ValueError("MarginalCellLeaf needs finite cells of positive width")
        if self.edges is None:  # one bin over the cells' span: uniform leaves
            self.edges, self.cdf = [float(lo.min()), float(hi.max())], [0.0, 1.0]
        e, _, _ = self._hist()
        if np.any(lo < e[0]) or np.any(hi > e[-1]):
            raise ValueError("MarginalCellLeaf: a cell reaches outside the histogram's edges")
        self.lo_, self.hi_ = lo, hi
        return self

    def check_param_arrays(self, arrays, n_leaves, n_levels):
        super().check_param_arrays(arrays, n_leaves, n_levels)
        e, _, _ = self._hist()
        lo, hi = arrays["lo_"], arrays["hi_"]
        if not (np.isfinite(lo).all() and np.isfinite(hi).all() and (lo < hi).all()
                and (lo >= e[0]).all() and (hi <= e[-1]).all()):
            raise ValueError("MarginalCellLeaf: cells need finite lo_ < hi_ inside the edges")

    # ------------------------------------------------------------------ queries
    def log_prob(self, leaf, x):
        e, _, dens = self._hist()
        x = np.asarray(x, float)
        lo, hi = self.lo_[leaf], self.hi_[leaf]
        b = np.clip(np.searchsorted(e, np.nan_to_num(x), side="left") - 1, 0, len(dens) - 1)
        inside = (x > lo) & (x <= hi)
        with np.errstate(divide="ignore"):
            out = np.where(inside, np.log(dens[b]) - self._log_mass(leaf), -np.inf)
        return np.where(np.isnan(x), 0.0, out)

    def log_prob_interval(self, leaf, lo, hi):
        a = np.maximum(np.asarray(lo, float), self.lo_[leaf])
        b = np.minimum(np.asarray(hi, float), self.hi_[leaf])
        with np.errstate(divide="ignore"):
            return np.log(np.maximum(self._F(np.maximum(a, b)) - self._F(a), 0.0)) - (
                self._log_mass(leaf))

    def sample(self, leaf, rng, lo=None, hi=None, levels=None):
        return self._draw(leaf, rng.random(len(leaf)), lo, hi)

    def sample_uniform(self, leaf, u):
        return self._draw(leaf, u, None, None)

    def _draw(self, leaf, u, lo, hi):
        e, c, _ = self._hist()
        a, b = self.lo_[leaf], self.hi_[leaf]
        if lo is not None:
            a = np.maximum(a, lo)
        if hi is not None:
            b = np.minimum(b, hi)
        b = np.maximum(a, b)
        fa, fb = self._F(a), self._F(b)
        x = np.interp(fa + np.asarray(u, float) * (fb - fa), c, e)
        return np.clip(x, a, b)  # rounding at the cell's faces

    def mean(self, leaf):
        return self.mean_interval(leaf, -np.inf, np.inf)

    def mean_interval(self, leaf, lo, hi):
        e, _, dens = self._hist()
        a = np.maximum(self.lo_[leaf], lo)
        b = np.maximum(a, np.minimum(self.hi_[leaf], hi))
        s = np.clip(a[:, None], e[None, :-1], e[None, 1:])  # [m, bins]: overlap with each bin
        t = np.clip(b[:, None], e[None, :-1], e[None, 1:])
        mass = (dens[None, :] * (t - s)).sum(1)
        first = (dens[None, :] * (t - s) * (0.5 * s + 0.5 * t)).sum(1)  # (no t * t overflow)
        return np.where(mass > 0, first / np.where(mass > 0, mass, 1.0), 0.5 * (a + b))

    def log_max_density(self, leaf):
        """Log of the density's maximum on each leaf's cell."""
        e, _, dens = self._hist()
        lo, hi = self.lo_[leaf], self.hi_[leaf]
        overlap = (e[None, :-1] < hi[:, None]) & (e[None, 1:] > lo[:, None])
        return np.log(np.where(overlap, dens[None, :], 0.0).max(1)) - np.log(self._mass(leaf))

    # ------------------------------------------------------------------ torch
    def torch_params(self, dtype, device):
        """Cell bounds and log normaliser per leaf ``[L, 3]``, the shared edges and log
        densities of the bins (repeated per leaf, the hook's leading dimension)."""
        e, _, dens = self._hist()
        L = len(self.lo_)
        npdt = numpy_dtype(dtype)
        lo, hi = cell_bounds_to(self.lo_, self.hi_, npdt)
        table = np.stack([lo, hi, np.log(self._mass(np.arange(L))).astype(npdt)], axis=1)
        return {"table": torch_tensor(table, dtype, device),
                "edges": torch_tensor(np.broadcast_to(edges_to(e, npdt), (L, len(e))).copy(),
                                      dtype, device),
                "logd": torch_tensor(np.broadcast_to(np.log(dens), (L, len(dens))).copy(),
                                     dtype, device)}

    @staticmethod
    def torch_log_prob(params, leaf, x):
        import torch

        lo, hi, logz = params["table"][leaf].unbind(-1)
        if params["edges"].shape[0] == 0:
            return torch.full_like(x, -math.inf)
        e, logd_bins = params["edges"][0], params["logd"][0]  # shared by every leaf
        b = (torch.searchsorted(e, x.contiguous()) - 1).clamp(0, len(logd_bins) - 1)
        logd = logd_bins[b] - logz  # O(pairs) memory: no per-pair copy of the edges
        return torch.where((x > lo) & (x <= hi), logd, torch.full_like(logd, -math.inf))

    def torch_sample_params(self, n_leaves, device):
        """Per leaf the CDF at its cell's faces, the shared edges and CDF (repeated per
        leaf), for inverse-CDF draws on the device."""
        e, c, _ = self._hist()
        L = len(self.lo_)
        fa, fb = self._F(self.lo_), self._F(self.hi_)
        return {"face": torch_tensor(np.stack([fa, fb, self.lo_, self.hi_], axis=1), "float64",
                                     device),
                "edges": torch_tensor(np.broadcast_to(e, (L, len(e))).copy(), "float64", device),
                "cdf": torch_tensor(np.broadcast_to(c, (L, len(c))).copy(), "float64", device)}

    @staticmethod
    def torch_sample(params, leaf, u):
        import torch

        fa, fb, lo, hi = params["face"][leaf].unbind(-1)
        c, e = params["cdf"][0], params["edges"][0]  # shared by every leaf
        p = fa + u * (fb - fa)
        b = (torch.searchsorted(c, p.contiguous(), right=True) - 1).clamp(0, len(c) - 2)
        c0, c1 = c[b], c[b + 1]
        e0, e1 = e[b], e[b + 1]
        x = e0 + (p - c0) / (c1 - c0) * (e1 - e0)
        return torch.minimum(torch.maximum(x, lo), hi)
