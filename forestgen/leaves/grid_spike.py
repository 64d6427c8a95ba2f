"""A numeric leaf that keeps the values its column repeats on a grid (ARF's ``grid_spikes``,
issue 37).

A column measured on a grid (whole millimetres of mercury, wind speed to 0.1 mph, 40 hours a
week in half the rows) repeats values; FORDE's leaf normal (Watson et al. 2023, Alg. 2) smears
them, so a held-out row at a repeated value gets a density far below the column's marginal,
whose histogram keeps the value's grid cell as a spike
(:func:`~forestgen.families.intersection.marginals.grid_spikes`). This leaf mixes the base
leaf ``f_l`` (FORDE's truncated normal) with the leaf's own repeated values, each spread
uniformly over its grid cell:

    p(x | l) = (1 - w_l) f_l(x) + w_l sum_v s_lv 1[x in C_lv] / |C_lv|,    w_l = w r_l,

``v`` the column's repeated ``values`` (seen at least twice in the training rows) that leaf
``l``'s rows hold, ``s_lv`` their (weighted) shares among those rows, ``r_l`` the share of the
leaf's rows at such a value, and ``C_lv`` the grid cell ``(v - h/2, v + h/2]`` of step ``h``
(cut at the midpoint to a neighbouring value closer than ``h``) intersected with the leaf's
cell. Each spike integrates to one over its cell and the cells of one leaf are disjoint, so
the mixture integrates to one: no point masses, a density against Lebesgue measure, whose
draws on a grid column round back to ``v`` (the encoder's rounding cell of ``v`` is its grid
cell). A leaf without a repeated value keeps ``f_l`` alone.

One uniform per draw serves both parts (:meth:`sample_uniform`): ``u < w_l`` picks the spike
whose cumulative share holds ``u / w_l`` and places the draw in its cell by what is left of the
uniform; else the base part draws from ``(u - w_l) / (1 - w_l)``. The torch sampler makes the
same draw.
"""

from __future__ import annotations

import copy
import math
from typing import Any

import numpy as np

from forestgen import registry
from forestgen.leaves.base import (
    ColumnCell,
    LeafModel,
    cell_bounds_to,
    edges_to,
    numpy_dtype,
    torch_tensor,
)
from forestgen.registry import register

#: largest uniform below one (a rescaled uniform must stay in [0, 1))
_BELOW_ONE = 1.0 - 2.0**-53


def spike_cells(values: np.ndarray, step: float) -> tuple[np.ndarray, np.ndarray]:
    """The grid cells ``(lo, hi]`` of sorted distinct ``values`` on a grid of ``step``:
    ``(v - step/2, v + step/2]``, cut at the midpoint to a neighbour closer than ``step``,
    so that no two cells overlap."""
    v = np.asarray(values, float)
    lo = v - 0.5 * step
    hi = v + 0.5 * step
    if len(v) > 1:
        mid = 0.5 * (v[:-1] + v[1:])
        lo[1:] = np.maximum(lo[1:], mid)
        hi[:-1] = np.minimum(hi[:-1], lo[1:])
    return lo, hi


@register("leaf", "grid_spike")
class GridSpikeLeaf(LeafModel):
    """``base`` numeric leaf mixed with the leaf's repeated grid values (module docstring).

    Parameters
    ----------
    base : numeric leaf model (name, class or instance; default ``"truncnorm"``).
    step : the column's grid step ``h > 0`` (encoded units).
    values : the column's repeated values (``None``: at ``fit``, the values seen at least twice
        among the fitting pairs).
    weight : ``w`` in ``[0, 1]``: a leaf whose rows all lie at repeated values gives its
        spikes the share ``w`` (0: ``base`` alone).
    """

    discrete = False
    handles_cells = frozenset({"zero-width", "unbounded", "empty"})

    def __init__(self, *, base: Any = "truncnorm", step: float = 1.0, values=None,
                 weight: float = 0.5):
        self.base = base
        self.step = step
        self.values = None if values is None else [float(v) for v in values]
        self.weight = weight

    def get_params(self) -> dict:
        return {"base": self.base, "step": self.step,
                "values": None if self.values is None else list(self.values),
                "weight": self.weight}

    def _base_model(self) -> LeafModel:
        if not hasattr(self, "base_"):
            base = registry.resolve("leaf", self.base, LeafModel)
            # an instance given as ``base`` is copied: copies of this leaf (one per column)
            # must not share, and fit, one base
            self.base_ = copy.deepcopy(base) if base is self.base else base
            if self.base_.discrete:
                raise ValueError(f"GridSpikeLeaf needs a numeric base, got {self.base!r}")
        return self.base_

    def _cells(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(values, lo, hi)`` of the spike cells, cached per ``values`` / ``step``."""
        cache = getattr(self, "_cell_cache", None)
        if cache is not None and cache[0] is self.values and cache[1] == self.step:
            return cache[2]
        h = float(self.step)
        if not (math.isfinite(h) and h > 0):
            raise ValueError(f"GridSpikeLeaf step must be a finite number > 0, got "
                             f"{self.step!r}")
        v = np.asarray(self.values if self.values is not None else [], float)
        if v.size and not (np.isfinite(v).all() and np.all(np.diff(v) > 0)):
            raise ValueError("GridSpikeLeaf values must be finite, distinct and increasing")
        out = (v, *spike_cells(v, h))
        self._cell_cache = (self.values, self.step, out)
        return out

    # ------------------------------------------------------------------ fit
    def fit(self, x, leaf, cell: ColumnCell, weight=None) -> GridSpikeLeaf:
        w = float(self.weight)
        if not (math.isfinite(w) and 0.0 <= w <= 1.0):
            raise ValueError(f"GridSpikeLeaf weight must be a number in [0, 1], got "
                             f"{self.weight!r}")
        x = np.asarray(x, float)
        leaf = np.asarray(leaf, np.int64)
        L = len(cell.lower)
        self._base_model().fit(x, leaf, cell, weight)
        keep = ~np.isnan(x)
        wt = np.ones(len(x)) if weight is None else np.asarray(weight, float)
        if self.values is None:  # the values repeated among the fitting pairs
            u, cnt = np.unique(x[keep & (wt > 0)], return_counts=True)
            self.values = [float(v) for v in u[cnt >= 2]]
        vals, clo, chi = self._cells()
        n = np.bincount(leaf[keep], weights=wt[keep], minlength=L)[:L]
        K = len(vals)
        k = np.searchsorted(vals, x) if K else np.zeros(len(x), np.int64)
        on = keep & (wt > 0) & (k < K)
        on[on] = vals[k[on]] == x[on]
        pair_key = leaf[on] * K + k[on]
        if L * K <= 8 * len(x) + 1024:  # a dense count, in the pairs' order as below
            cnt = np.bincount(pair_key, weights=wt[on], minlength=L * K)
            key = np.flatnonzero(np.bincount(pair_key, minlength=L * K))
            cnt = cnt[key]
        else:
            key, inv = np.unique(pair_key, return_inverse=True)
            cnt = np.bincount(inv, weights=wt[on], minlength=len(key))
        lf = key // max(K, 1)
        kk = key % max(K, 1)
        lo_c = np.maximum(clo[kk], np.asarray(cell.lower, float)[lf]) if K else kk
        hi_c = np.minimum(chi[kk], np.asarray(cell.upper, float)[lf]) if K else kk
        wide = hi_c > lo_c  # (a zero-width cell keeps its base leaf alone)
        key, cnt, lf = key[wide], cnt[wide], lf[wide]
        s = np.bincount(lf, weights=cnt, minlength=L)[:L]
        self.lo_ = np.asarray(cell.lower, float).copy()
        self.hi_ = np.asarray(cell.upper, float).copy()
        self.offset_ = np.r_[0, np.cumsum(np.bincount(lf, minlength=L)[:L])].astype(np.int64)
        self.spike_ = (key % max(K, 1)).astype(np.int64)
        with np.errstate(invalid="ignore", divide="ignore"):
            self.share_ = np.where(s[lf] > 0, cnt / s[lf], 0.0)
            rate = np.where(n > 0, s / np.where(n > 0, n, 1.0), 0.0)
        self.fit_rate_ = np.minimum(rate, 1.0)  # (for set_weight; not saved)
        self.weight_ = w * self.fit_rate_
        return self

    def set_weight(self, weight: float) -> GridSpikeLeaf:
        """Only the leaves' spike weights for another ``weight`` (the fit's spikes kept): what
        a fit with ``weight`` would give."""
        w = float(weight)
        if not (math.isfinite(w) and 0.0 <= w <= 1.0):
            raise ValueError(f"GridSpikeLeaf weight must be a number in [0, 1], got "
                             f"{weight!r}")
        if not hasattr(self, "fit_rate_"):
            raise ValueError("GridSpikeLeaf.set_weight needs a fitted leaf (not a loaded one)")
        self.weight = weight
        self.weight_ = w * self.fit_rate_
        return self

    # ------------------------------------------------------------------ spikes
    def _entry_cells(self, e: np.ndarray, leaf: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Cells ``(lo, hi]`` of spike entries ``e`` of ``leaf``: the grid cell in the leaf's
        cell."""
        _, clo, chi = self._cells()
        k = self.spike_[e]
        return np.maximum(clo[k], self.lo_[leaf]), np.minimum(chi[k], self.hi_[leaf])

    def _pairs(self, leaf: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Every (query, spike entry) pair of the queries' leaves: ``(query index, entry)``."""
        start = self.offset_[leaf]
        cnt = self.offset_[leaf + 1] - start
        q = np.repeat(np.arange(len(leaf)), cnt)
        first = np.r_[0, np.cumsum(cnt)[:-1]]
        e = start[q] + np.arange(len(q)) - first[q]
        return q, e

    def spike_log_prob(self, leaf, x) -> np.ndarray:
        """Log density of the spike part of ``leaf`` at ``x`` (``-inf`` off its spikes)."""
        leaf = np.asarray(leaf, np.int64)
        x = np.asarray(x, float)
        vals, clo, chi = self._cells()
        K = len(vals)
        out = np.full(len(x), -np.inf)
        if K == 0 or len(self.spike_) == 0:
            return out
        k = np.searchsorted(clo, x, side="left") - 1  # the cell with lo < x, if x <= its hi
        ok = (k >= 0) & ~np.isnan(x)
        ok[ok] = x[ok] <= chi[k[ok]]
        ok &= (x > self.lo_[leaf]) & (x <= self.hi_[leaf])
        if not ok.any():
            return out
        # entries are sorted by (leaf, spike): one search of the pair's key
        keys = self._keys()
        want = leaf[ok] * K + k[ok]
        pos = np.minimum(np.searchsorted(keys, want), len(keys) - 1)
        hit = keys[pos] == want
        pos = pos[hit]
        idx = np.flatnonzero(ok)[hit]
        a, b = self._entry_cells(pos, leaf[idx])
        with np.errstate(divide="ignore"):
            out[idx] = np.log(self.share_[pos]) - np.log(b - a)
        return out

    def _keys(self) -> np.ndarray:
        """``leaf * K + spike`` of every entry (increasing), cached per fitted arrays."""
        cache = getattr(self, "_key_cache", None)
        if cache is not None and cache[0] is self.offset_ and cache[1] is self.spike_:
            return cache[2]
        K = max(len(self._cells()[0]), 1)
        lf = np.repeat(np.arange(len(self.offset_) - 1), np.diff(self.offset_))
        keys = lf * K + self.spike_
        self._key_cache = (self.offset_, self.spike_, keys)
        return keys

    def part_log_probs(self, leaf, x) -> tuple[np.ndarray, np.ndarray]:
        """The log densities of the two parts at ``(leaf, x)`` pairs: the base leaf's and
        the spikes' (``-inf`` off them)."""
        leaf = np.asarray(leaf, np.int64)
        x = np.asarray(x, float)
        return self._base_model().log_prob(leaf, x), self.spike_log_prob(leaf, x)

    def mix_log_prob(self, leaf, base: np.ndarray, spike: np.ndarray,
                     weight: float) -> np.ndarray:
        """:meth:`log_prob` from :meth:`part_log_probs` at the leaf weights a fit with
        ``weight`` gives: scores several weights with the parts evaluated once."""
        w = float(weight) * self.fit_rate_[np.asarray(leaf, np.int64)]
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.logaddexp(np.log1p(-w) + base,
                                np.where(w > 0, np.log(w) + spike, -np.inf))

    # ------------------------------------------------------------------ persistence
    def param_arrays(self) -> dict[str, np.ndarray]:
        out = {"weight_": self.weight_, "lo_": self.lo_, "hi_": self.hi_,
               "offset_": self.offset_, "spike_": self.spike_, "share_": self.share_}
        out.update({f"base_{k}": v for k, v in self._base_model().param_arrays().items()})
        return out

    def set_param_arrays(self, arrays: dict[str, np.ndarray]) -> GridSpikeLeaf:
        for k in ("weight_", "lo_", "hi_", "share_"):
            setattr(self, k, np.asarray(arrays[k], float))
        for k in ("offset_", "spike_"):
            setattr(self, k, np.asarray(arrays[k], np.int64))
        self._base_model().set_param_arrays({k[5:]: v for k, v in arrays.items()
                                             if k.startswith("base_")})
        return self

    def check_param_arrays(self, arrays, n_leaves, n_levels):
        name = type(self).__name__
        need = {"weight_", "lo_", "hi_", "offset_", "spike_", "share_"}
        if not need <= set(arrays):
            raise ValueError(f"{name} needs arrays {sorted(need)} (and base_*), got "
                             f"{sorted(arrays)}")
        w, lo, hi = arrays["weight_"], arrays["lo_"], arrays["hi_"]
        for k, v in (("weight_", w), ("lo_", lo), ("hi_", hi)):
            if not isinstance(v, np.ndarray) or v.shape != (n_leaves,) or np.isnan(v).any():
                raise ValueError(f"{name}.{k} must be [{n_leaves}] numbers")
        if not ((w >= 0).all() and (w <= 1).all()):
            raise ValueError(f"{name}.weight_ must be weights in [0, 1]")
        off, sp, sh = arrays["offset_"], arrays["spike_"], arrays["share_"]
        K = len(self._cells()[0])
        if (off.shape != (n_leaves + 1,) or off.dtype.kind != "i" or off[0] != 0
                or np.any(np.diff(off) < 0) or sp.shape != (int(off[-1]),)
                or sh.shape != sp.shape or sp.dtype.kind != "i"
                or (sp.size and (sp.min() < 0 or sp.max() >= K))
                or not (np.isfinite(sh).all() and (sh >= 0).all() and (sh <= 1).all())):
            raise ValueError(f"{name}: offset_ [{n_leaves + 1}] must index spike_ / share_ "
                             f"(spikes of {K} values, shares in [0, 1])")
        if np.any((w > 0) & (np.diff(off) == 0)):
            raise ValueError(f"{name}.weight_ must be 0 in a leaf without spikes")
        self._base_model().check_param_arrays(
            {k[5:]: v for k, v in arrays.items() if k.startswith("base_")}, n_leaves, n_levels)

    # ------------------------------------------------------------------ queries
    def log_prob(self, leaf, x):
        leaf = np.asarray(leaf, np.int64)
        x = np.asarray(x, float)
        w = self.weight_[leaf]
        base, spike = self.part_log_probs(leaf, x)
        with np.errstate(divide="ignore", invalid="ignore"):
            out = np.logaddexp(np.log1p(-w) + base,
                               np.where(w > 0, np.log(w) + spike, -np.inf))
        return np.where(np.isnan(x), 0.0, out)

    def _spike_interval(self, leaf, lo, hi):
        """Per query the spike part's mass in ``(lo, hi]`` and its first moment there, with
        the pairs and each pair's overlap ``(a, b]`` and mass (for conditional draws)."""
        m = len(leaf)
        lo = np.broadcast_to(np.asarray(lo, float), (m,))
        hi = np.broadcast_to(np.asarray(hi, float), (m,))
        q, e = self._pairs(leaf)
        a, b = self._entry_cells(e, leaf[q])
        s, t = np.maximum(a, lo[q]), np.minimum(b, hi[q])
        t = np.maximum(s, t)
        with np.errstate(invalid="ignore", divide="ignore"):
            frac = np.where(b > a, (t - s) / np.where(b > a, b - a, 1.0), 0.0)
        pm = self.share_[e] * frac
        mass = np.bincount(q, weights=pm, minlength=m)[:m]
        first = np.bincount(q, weights=pm * 0.5 * (s + t), minlength=m)[:m]
        return mass, first, (q, e, s, t, pm)

    def _interval_parts(self, leaf, lo, hi):
        leaf = np.asarray(leaf, np.int64)
        w = self.weight_[leaf]
        with np.errstate(under="ignore", invalid="ignore"):
            pb = np.exp(self._base_model().log_prob_interval(leaf, lo, hi))
        mass, first, pairs = self._spike_interval(leaf, lo, hi)
        return leaf, (1.0 - w) * np.nan_to_num(pb), w * mass, w * first, pairs

    def log_prob_interval(self, leaf, lo, hi):
        _, pb, ps, _, _ = self._interval_parts(leaf, lo, hi)
        with np.errstate(divide="ignore"):
            return np.log(pb + ps)

    def mean(self, leaf):
        leaf = np.asarray(leaf, np.int64)
        w = self.weight_[leaf]
        base = self._base_model().mean(leaf)
        _, first, _ = self._spike_interval(leaf, -np.inf, np.inf)
        return np.where(w > 0, (1.0 - w) * base + w * first, base)

    def mean_interval(self, leaf, lo, hi):
        leaf, pb, ps, fs, _ = self._interval_parts(leaf, lo, hi)
        mb = self._base_model().mean_interval(leaf, lo, hi)
        tot = pb + ps
        with np.errstate(invalid="ignore", divide="ignore"):
            mix = (pb * np.nan_to_num(mb) + fs) / tot
        return np.where((tot > 0) & (ps > 0), mix, mb)

    @property
    def has_uniform_sampler(self) -> bool:
        return self._base_model().has_uniform_sampler

    def _spike_draw(self, leaf, u) -> np.ndarray:
        """Spike-part draws from uniforms ``u``: the entry whose cumulative share holds ``u``,
        then the place in its cell from the rest of ``u``."""
        start = self.offset_[leaf]
        cum = np.cumsum(self.share_)
        before = np.where(start > 0, cum[np.maximum(start - 1, 0)], 0.0)
        end = self.offset_[leaf + 1]
        e = np.searchsorted(cum, before + u * (cum[end - 1] - before), side="right")
        e = np.clip(e, start, end - 1)
        lo_c = np.where(e > 0, cum[np.maximum(e - 1, 0)], 0.0)
        t = np.clip((before + u * (cum[end - 1] - before) - lo_c)
                    / np.maximum(self.share_[e], 1e-300), 0.0, 1.0)
        a, b = self._entry_cells(e, leaf)
        x = a + t * (b - a)
        return np.minimum(np.maximum(x, np.nextafter(a, np.inf)), b)

    def sample_uniform(self, leaf, u):
        leaf = np.asarray(leaf, np.int64)
        u = np.asarray(u, float)
        base = self._base_model()
        if not base.has_uniform_sampler:
            raise NotImplementedError(f"GridSpikeLeaf: its base {type(base).__name__} has no "
                                      "sample_uniform")
        w = self.weight_[leaf]
        on = u < w
        out = np.empty(len(leaf))
        if on.any():
            out[on] = self._spike_draw(leaf[on], np.minimum(u[on] / w[on], _BELOW_ONE))
        rest = ~on
        if rest.any():
            out[rest] = base.sample_uniform(
                leaf[rest], np.minimum((u[rest] - w[rest]) / (1.0 - w[rest]), _BELOW_ONE))
        return out

    def sample(self, leaf, rng, lo=None, hi=None, levels=None):
        leaf = np.asarray(leaf, np.int64)
        m = len(leaf)
        if lo is None and hi is None and self._base_model().has_uniform_sampler:
            return self.sample_uniform(leaf, rng.random(m))
        lo_ = np.full(m, -np.inf) if lo is None else np.broadcast_to(np.asarray(lo, float),
                                                                     (m,))
        hi_ = np.full(m, np.inf) if hi is None else np.broadcast_to(np.asarray(hi, float), (m,))
        _, pb, ps, _, (q, e, s, t, pm) = self._interval_parts(leaf, lo_, hi_)
        tot = pb + ps
        # no mass in the interval (evidence outside the leaf): the base model decides
        u = rng.random(m)
        on = (tot > 0) & (u * np.where(tot > 0, tot, 1.0) < ps)
        out = np.empty(m)
        if on.any():  # the pair by its mass in the interval, then uniform on its overlap
            v = rng.random(m)
            sel = on[q] & (pm > 0)
            qs, ss, ts, ms = q[sel], s[sel], t[sel], pm[sel]
            cum = np.cumsum(ms)
            first = np.searchsorted(qs, np.flatnonzero(on))
            last = np.searchsorted(qs, np.flatnonzero(on), side="right") - 1
            before = np.where(first > 0, cum[np.maximum(first - 1, 0)], 0.0)
            target = before + v[on] * (cum[last] - before)
            p = np.clip(np.searchsorted(cum, target, side="right"), first, last)
            lo_c = np.where(p > 0, cum[np.maximum(p - 1, 0)], 0.0)
            r = np.clip((target - lo_c) / np.maximum(ms[p], 1e-300), 0.0, 1.0)
            x = ss[p] + r * (ts[p] - ss[p])
            out[on] = np.minimum(np.maximum(x, np.nextafter(ss[p], np.inf)), ts[p])
        rest = ~on
        if rest.any():
            out[rest] = self._base_model().sample(
                leaf[rest], rng, lo=None if lo is None else lo_[rest],
                hi=None if hi is None else hi_[rest])
        return out

    # ------------------------------------------------------------------ torch hooks
    @property
    def has_torch(self) -> bool:
        return self._base_model().has_torch

    @property
    def has_torch_sampler(self) -> bool:
        return self._base_model().has_torch_sampler

    def _entry_table(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per entry: its leaf, its cell in the leaf ``(a, b]`` and ``log(share / width)``."""
        L = len(self.weight_)
        lf = np.repeat(np.arange(L), np.diff(self.offset_))
        a, b = self._entry_cells(np.arange(len(self.spike_)), lf)
        with np.errstate(divide="ignore"):
            logd = np.log(self.share_) - np.log(b - a)
        return lf, a, b, logd

    def torch_params(self, dtype, device) -> dict:
        base = self._base_model()
        vals, clo, chi = self._cells()
        npdt = numpy_dtype(dtype)
        K = len(vals)
        lf, _, _, logd = self._entry_table()
        with np.errstate(divide="ignore"):
            lw, l1w = np.log(self.weight_), np.log1p(-self.weight_)
        lo, hi = cell_bounds_to(self.lo_, self.hi_, npdt)
        return {"base": base.torch_params(dtype, device), "base_fn": type(base).torch_log_prob,
                "logw": torch_tensor(np.stack([lw, l1w], axis=1), dtype, device),
                "cell": torch_tensor(np.stack([lo, hi], axis=1), dtype, device),
                "clo": torch_tensor(edges_to(clo, npdt), dtype, device),
                "chi": torch_tensor(edges_to(chi, npdt), dtype, device),
                "key": torch_tensor(lf * max(K, 1) + self.spike_, "long", device),
                "logd": torch_tensor(logd, dtype, device), "K": max(K, 1)}

    @staticmethod
    def torch_log_prob(params, leaf, x):
        import torch

        lw, l1w = params["logw"][leaf].unbind(-1)
        base = params["base_fn"](params["base"], leaf, x)
        key, clo, chi = params["key"], params["clo"], params["chi"]
        spike = torch.full_like(base, -math.inf)
        if key.numel() and clo.numel():
            lo, hi = params["cell"][leaf].unbind(-1)
            k = (torch.searchsorted(clo, x.contiguous()) - 1).clamp(0, clo.numel() - 1)
            inside = (x > clo[k]) & (x <= chi[k]) & (x > lo) & (x <= hi)
            want = leaf * params["K"] + k
            pos = torch.searchsorted(key, want.contiguous()).clamp(max=key.numel() - 1)
            hit = inside & (key[pos] == want)
            spike = torch.where(hit, params["logd"][pos], spike)
        mix = torch.where(torch.isfinite(lw), lw + spike, torch.full_like(spike, -math.inf))
        return torch.logaddexp(l1w + base, mix)

    def torch_sample_params(self, n_leaves: int, device) -> dict:
        base = self._base_model()
        lf, a, b, _ = self._entry_table()
        cum = np.cumsum(self.share_)
        start, end = self.offset_[:-1], self.offset_[1:]
        before = np.where(start > 0, cum[np.maximum(start - 1, 0)], 0.0)
        total = np.where(end > start, cum[np.maximum(end - 1, 0)], 0.0)
        return {"base": base.torch_sample_params(n_leaves, device),
                "base_fn": type(base).torch_sample,
                "w": torch_tensor(self.weight_, "float64", device),
                "leaf": torch_tensor(np.stack([before, total], axis=1), "float64", device),
                "range": torch_tensor(np.stack([start, end], axis=1), "long", device),
                "cum": torch_tensor(cum, "float64", device),
                "share": torch_tensor(self.share_, "float64", device),
                "ab": torch_tensor(np.stack([a, b], axis=1), "float64", device)}

    @staticmethod
    def torch_sample(params, leaf, u):
        """:meth:`sample_uniform` on the device: ``u < w`` a spike from ``u / w``, else the
        base part from ``(u - w) / (1 - w)``."""
        import torch

        w = params["w"][leaf]
        on = u < w
        ub = ((u - w) / (1.0 - w).clamp(min=1e-300)).clamp(0.0, _BELOW_ONE)
        out = params["base_fn"](params["base"], leaf, ub)
        cum = params["cum"]
        if cum.numel() == 0:
            return out
        us = (u / torch.where(on, w, torch.ones_like(w))).clamp(0.0, _BELOW_ONE)
        before, total = params["leaf"][leaf].unbind(-1)
        start, end = params["range"][leaf].unbind(-1)
        target = before + us * (total - before)
        e = torch.searchsorted(cum, target.contiguous(), right=True)
        e = torch.minimum(torch.maximum(e, start), (end - 1).clamp(min=0))
        e = e.clamp(0, cum.numel() - 1)
        lo_c = torch.where(e > 0, cum[(e - 1).clamp(min=0)], torch.zeros_like(target))
        t = ((target - lo_c) / params["share"][e].clamp(min=1e-300)).clamp(0.0, 1.0)
        a, b = params["ab"][e].unbind(-1)
        x = a + t * (b - a)
        x = torch.minimum(torch.maximum(x, torch.nextafter(a, torch.full_like(a, math.inf))), b)
        return torch.where(on, x, out)
