"""Kernel-density leaves: a mixture of normals centred on the leaf's own values, each truncated
to the leaf cell (issue 37).

synthpop's sequential CART draws an *observed* value of the leaf a row falls in (Nowok, Raab &
Dibben 2016); a truncated normal fitted to the leaf's 5-10 values smooths them into one bump.
This leaf keeps both. In leaf ``l`` with values ``v_i`` (weights ``w_i``, equal values merged),
mean ``m_l``, variance ``var_l`` and weighted count ``n_l``,

    p(x | l) = (1 - eps) sum_i (w_i / n_l) N(x; m_l + k (v_i - m_l), (k h_l)^2) / Z_i
               + eps N(x; m_l, s_l^2) / Z_l                          on the cell (lo_l, hi_l],

each normal divided by its mass ``Z`` inside the cell, so each one, and the mixture, integrates
to one over the cell (a boundary-renormalised kernel estimate, as a truncated normal is a
renormalised normal). A draw picks a kernel by its weight and moves its centre by a truncated
normal: with a narrow ``h_l`` it lands next to an observed value (on a grid column it rounds
back to it: synthpop's draw), with a wide one it is a smooth law.

* **Bandwidth**: Silverman's scale of the leaf, ``h_l = c * s_l * n_l ** (-1/5)``, with ``s_l``
  the leaf's SD (at least the column's resolution, the least gap between its distinct values;
  ARF's one-row width ``sqrt(2) * halfwidth / 1.96`` for a leaf of one value) and one factor
  ``c`` per column: given, or chosen by leave-one-out likelihood cross-validation (Habbema,
  Hermans & van den Broek 1974; Duin 1976) — the ``c`` of :data:`FACTORS` with the largest sum
  over the fitting values of the log-probability of each value's resolution cell (the value
  +- half the resolution) under the other values of its leaf. Scoring the cell rather than the
  point keeps the choice from collapsing onto tied grid values (a point density at a tie grows
  without bound as ``h -> 0``; a cell's probability is at most 1).
* **Variance** (``keep_variance``): the centres are shrunk toward the leaf's mean by ``k = (1 +
  h_l**2 / var_l) ** -1/2`` and the widths by the same ``k``, so the mixture has the leaf's own
  mean and variance before truncation (Silverman & Young's shrunk smoothed bootstrap, 1987);
  a plain kernel estimate (``k = 1``) inflates the variance by ``h_l**2``.
* **Adaptive widths** (``adaptive=True``): the leaf's spread is Silverman's robust
  ``min(s_l, IQR_l / 1.349)`` (at least the resolution) instead of its SD, and each kernel's
  width is that bandwidth times Abramson's (1982) factor ``(f(v_i) / g) ** -1/2``, with ``f``
  the leaf's fixed-width estimate at the kernel's centre and ``g`` its weighted geometric mean
  over the leaf (factors clipped to ``[1/20, 20]``): narrow kernels where the values are dense,
  wide ones in the tails. On a skewed column (anes96's ``popul``: a quarter zeros, median 22,
  a tail to 7,300; seed 0 of the leaderboard) the SD-scaled width, 94, smeared the bulk: the
  Chain's draws had median 93; with adaptive widths (12 at the median kernel) 27.5. The
  shrink toward the mean then uses the kernels' mean square width, so the mixture still has
  the leaf's mean and variance before truncation. ``bandwidth="loo"`` chooses ``c`` with the
  fixed SD-scaled widths.
* **Defensive share** ``eps`` (Hesterberg 1995's defensive mixture): one wide kernel ``N(m_l,
  s_l**2)`` per leaf, so a value away from the leaf's values keeps a density near the
  truncated normal's (held-out likelihood) while ``1 - eps`` of the draws stay near observed
  values.
* **Tail share** ``tau`` (``tail``): one more kernel per leaf with values, the column's normal
  ``N(m, s**2)`` (the mean and SD of all the column's fitting values, at least its
  resolution) with weight ``tau``, the others scaled by ``1 - tau``: a value unlike its leaf
  keeps at least ``tau`` times the column's normal density. The leaf's normal alone is no such
  guard when the leaf's values are (nearly) equal: its SD is then the column's resolution,
  and a held-out value many resolutions away scored hundreds of nats below the column's
  marginal (the Chain on Boston, a leaf of ``tax = 666`` rows,
  ``benchmarks/results/scaled_defaults_s43.md``). ``bandwidth="loo"`` chooses ``c`` without
  the tail kernel.
* A leaf without values gets one kernel at its cell's centre with ARF's empty-leaf width
  (:mod:`forestgen.leaves.truncnorm`).

Storage: a ragged list of kernels per leaf (``offset_ [L + 1]``; ``center_``, ``weight_``,
``h_`` per kernel) and the leaf's cell ``lo_``, ``hi_`` and ``count_``: ``24 P + 32 L`` bytes
for ``P`` kernels.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from numba import njit, prange

from forestgen.data.dtypes import MAX_MAGNITUDE
from forestgen.leaves.base import ColumnCell, LeafModel, scaled_cell
from forestgen.leaves.normal_math import (
    LOG_SQRT_2PI,
    log_ndtr_diff,
    sample_std_truncnorm,
    std_truncnorm_mean,
)
from forestgen.leaves.stats import column_scale
from forestgen.leaves.truncnorm import Z975
from forestgen.parallel import parallel_kernel
from forestgen.registry import register

#: bandwidth factors ``c`` the leave-one-out choice tries (``bandwidth="loo"``)
FACTORS = (0.05, 0.1, 0.2, 0.3, 0.45, 0.65, 0.9, 1.25, 1.75, 2.5)
#: fitting values scored by the leave-one-out choice (a fixed subsample past it)
LOO_ROWS = 1000
#: (entry, kernel) pairs per chunk of the vectorised interval queries
PAIR_BUDGET = 1 << 21


@register("leaf", "kernel")
class KernelLeaf(LeafModel):
    """Kernel density of the leaf's own values, truncated to the cell (module docstring).

    Parameters
    ----------
    bandwidth : ``"loo"`` (default: the factor ``c`` of :data:`FACTORS` with the best
        leave-one-out likelihood of the fitting values, kept as ``factor_``) or a float
        ``c > 0``; the leaf's bandwidth is ``c * s_l * n_l ** (-1/5)``.
    keep_variance : True (default): kernels shrunk toward the leaf's mean so that the mixture
        keeps the leaf's mean and variance (module docstring); ``False``: the plain estimate.
    defensive : share ``eps`` in ``[0, 1)`` of one wide kernel per leaf (default 0).
    defensive_scale : ``"leaf"`` (default: the wide kernel is the leaf's normal ``N(m_l,
        s_l**2)``) or ``"column"`` (the column's normal, the mean and SD of all its values: a
        value unlike its leaf keeps ``eps`` times the column's density).
    tail : share ``tau`` of the column's normal in every leaf with values (default 0; module
        docstring); the leaf's own kernels and defensive kernel keep ``1 - tail``.
    adaptive : False (default: one width per leaf) or True: Abramson's widths, each kernel's
        the leaf's width times ``(f(v_i) / g) ** -1/2`` (module docstring).
    """

    discrete = False
    handles_cells = frozenset({"zero-width", "unbounded", "empty"})
    fitted_arrays = ("offset_", "center_", "weight_", "h_", "lo_", "hi_", "count_")

    def __init__(self, *, bandwidth: float | str = "loo", keep_variance: bool = True,
                 defensive: float = 0.0, defensive_scale: str = "leaf", tail: float = 0.0,
                 adaptive: bool = False):
        self.bandwidth = bandwidth
        self.adaptive = adaptive
        self.keep_variance = keep_variance
        self.defensive = defensive
        self.defensive_scale = defensive_scale
        self.tail = tail

    # ------------------------------------------------------------------ fit
    def fit(self, x, leaf, cell: ColumnCell, weight=None) -> KernelLeaf:
        """Fit in units of :func:`column_scale` (exact rescaling), then convert back."""
        b = self.bandwidth
        if isinstance(b, str) and b != "loo" or not isinstance(b, str) and not (
                isinstance(b, (int, float)) and math.isfinite(b) and b > 0):
            raise ValueError(f"KernelLeaf: bandwidth must be 'loo' or a number > 0, got {b!r}")
        if not (isinstance(self.defensive, (int, float)) and 0 <= self.defensive < 1):
            raise ValueError(f"KernelLeaf: defensive must be in [0, 1), got {self.defensive!r}")
        tail = self.tail
        if not (isinstance(tail, (int, float)) and 0 <= tail < 1):
            raise ValueError(f"KernelLeaf: tail must be in [0, 1), got {tail!r}")
        if self.defensive_scale not in ("leaf", "column"):
            raise ValueError(f"KernelLeaf: defensive_scale must be 'leaf' or 'column', got "
                             f"{self.defensive_scale!r}")
        s = column_scale(cell.data_min, cell.data_max)
        self._fit_scaled(np.asarray(x, np.float64) / s, np.asarray(leaf, np.int64),
                         scaled_cell(cell, s), weight)
        for k in ("center_", "h_", "lo_", "hi_"):
            setattr(self, k, getattr(self, k) * s)
        self._finish()
        return self

    def _fit_scaled(self, x, leaf, cell, weight) -> None:
        L = len(cell.lower)
        w = np.ones(len(x)) if weight is None else np.asarray(weight, np.float64)
        ok = ~np.isnan(x) & (w > 0)
        x, leaf, w = x[ok], leaf[ok], w[ok]
        # kernels: distinct (leaf, value) pairs with summed weights, ordered by leaf
        order = np.lexsort((x, leaf))
        x, leaf, w = x[order], leaf[order], w[order]
        new = np.r_[True, (leaf[1:] != leaf[:-1]) | (x[1:] != x[:-1])] if len(x) else \
            np.zeros(0, bool)
        group = np.cumsum(new) - 1
        kc, kl = x[new], leaf[new]
        kw = np.bincount(group, weights=w) if len(x) else np.zeros(0)
        cnt = np.bincount(leaf, weights=w, minlength=L)
        s1 = np.bincount(leaf, weights=w * x, minlength=L)
        mean = np.divide(s1, cnt, out=np.zeros(L), where=cnt > 0)
        dev = x - mean[leaf]
        ss = np.bincount(leaf, weights=w * dev * dev, minlength=L)
        with np.errstate(invalid="ignore", divide="ignore"):
            sd = np.sqrt(np.where(cnt > 1, ss / (cnt - 1), 0.0))
            var_b = np.where(cnt > 0, ss / cnt, 0.0)  # the leaf's own (biased) variance
        if not self.keep_variance:
            var_b = np.zeros(L)
        vals = np.unique(x)
        res = float(np.min(np.diff(vals))) if len(vals) > 1 else 0.0
        glo, ghi = cell.data_min, cell.data_max
        lo, hi = cell.lower.astype(np.float64), cell.upper.astype(np.float64)
        clo = np.maximum(np.where(np.isfinite(lo), lo, glo), glo)
        chi = np.minimum(np.where(np.isfinite(hi), hi, ghi), ghi)
        sigma0 = np.maximum(0.5 * (chi - clo), 0.0) / Z975  # ARF's empty-leaf width
        floor = max(1e-9 * max(abs(ghi - glo), 1.0), 4.0 * np.spacing(max(abs(glo), abs(ghi))))
        # the leaf's spread: its SD, at least the resolution; one value: ARF's one-row width
        wide = np.where(cnt >= 2, np.maximum(sd, res), np.sqrt(2.0) * sigma0)
        wide = np.maximum(wide, floor)
        scale = wide * np.maximum(cnt, 1.0) ** -0.2
        eps = float(self.defensive)
        # the column's normal: mean and SD of all values
        tot = max(float(w.sum()), 1e-300)
        cm = float(w @ x) / tot if len(x) else 0.5 * (glo + ghi)
        cwid = max(float(np.sqrt(w @ (x - cm) ** 2 / tot)) if len(x) else 0.0, res, floor)
        if self.defensive_scale == "column":
            dcen = np.full(L, cm)
            dwid = np.full(L, cwid)
        else:
            dcen, dwid = mean, wide
        if self.bandwidth != "loo":
            self.factor_ = float(self.bandwidth)
        elif res > 0:
            goff = np.r_[0, np.cumsum(np.bincount(kl, minlength=L))].astype(np.int64)
            self.factor_ = _loo_factor(x, leaf, w, group, kc, kw, goff, lo, hi, scale, res,
                                       cnt, mean, var_b, dcen, dwid, eps)
        else:  # one distinct value: nothing to choose between
            self.factor_ = 1.0
        h = self.factor_ * scale
        if self.adaptive and len(kc):
            # Silverman's robust spread min(SD, IQR / 1.349), at least the resolution
            iqr = _leaf_iqr(kc, kw, kl, cnt, L)
            h = self.factor_ * np.maximum(np.minimum(wide, np.maximum(iqr / 1.349, res)),
                                          floor) * np.maximum(cnt, 1.0) ** -0.2
        kh = h[kl]
        if self.adaptive and len(kc):
            kh = kh * _abramson(kc, kw, kl, h, L)
        # Silverman & Young's shrunk kernels: centres drawn toward the leaf's mean so that the
        # mixture keeps the leaf's variance (the kernels' mean square width in the leaf)
        if self.adaptive:
            msq = np.bincount(kl, weights=kw * kh * kh, minlength=L)
            k = _shrink(np.sqrt(np.divide(msq, cnt, out=np.zeros(L), where=cnt > 0)), var_b)
        else:
            k = _shrink(h, var_b)
        kc = mean[kl] + k[kl] * (kc - mean[kl])
        kh = k[kl] * kh
        tau = float(self.tail)
        kw = kw / cnt[kl] * ((1.0 - eps) * (1.0 - tau))
        full = np.flatnonzero(cnt > 0)
        empty = np.flatnonzero(cnt <= 0)
        # one wide kernel per leaf with values (the defensive share), one kernel at the centre
        # of each leaf without values (ARF's empty-leaf width)
        centre = np.clip(0.5 * (clo + chi), glo, ghi)
        parts = [(kc, kl, kw, kh), (centre[empty], empty, np.ones(len(empty)), sigma0[empty])]
        if eps > 0:
            parts.append((dcen[full], full, np.full(len(full), eps * (1.0 - tau)),
                          dwid[full]))
        if tau > 0:
            parts.append((np.full(len(full), cm), full, np.full(len(full), tau),
                          np.full(len(full), cwid)))
        kc, kl, kw, kh = (np.concatenate(v) for v in zip(*parts))
        o = np.argsort(kl, kind="stable")
        self.offset_ = np.r_[0, np.cumsum(np.bincount(kl, minlength=L))].astype(np.int64)
        self.center_ = kc[o].astype(np.float64)
        self.weight_ = kw[o].astype(np.float64)
        self.h_ = np.maximum(kh[o], floor).astype(np.float64)
        self.lo_, self.hi_ = lo, hi
        self.count_ = cnt

    def _finish(self) -> None:
        """Per-kernel truncation constants and per-leaf means from the fitted arrays."""
        kl = np.repeat(np.arange(len(self.lo_)), np.diff(self.offset_))
        h = self.h_
        self.a_ = (self.lo_[kl] - self.center_) / h
        self.b_ = (self.hi_[kl] - self.center_) / h
        self.logz_ = log_ndtr_diff(self.a_, self.b_)
        with np.errstate(divide="ignore"):
            self.const_ = np.log(self.weight_) - np.log(h) - LOG_SQRT_2PI - self.logz_
        km = self.center_ + h * std_truncnorm_mean(self.a_, self.b_)
        self.mean_ = np.bincount(kl, weights=self.weight_ * km, minlength=len(self.lo_))
        self.cum_ = kl + _segment_cumsum(self.weight_, self.offset_)

    # ------------------------------------------------------------------ persistence
    def param_arrays(self):
        return {k: getattr(self, k) for k in self.fitted_arrays}

    def set_param_arrays(self, arrays):
        super().set_param_arrays(arrays)
        self.offset_ = np.asarray(self.offset_, np.int64)
        self._finish()
        return self

    def check_param_arrays(self, arrays, n_leaves, n_levels):
        name = type(self).__name__
        if set(arrays) != set(self.fitted_arrays):
            raise ValueError(f"{name} needs arrays {sorted(self.fitted_arrays)}, got "
                             f"{sorted(arrays)}")
        off = arrays["offset_"]
        if off.dtype.kind != "i" or off.shape != (n_leaves + 1,) or off[0] != 0 or (
                np.diff(off) < 1).any():
            raise ValueError(f"{name}.offset_ must be {n_leaves + 1} increasing integers from "
                             f"0 (at least one kernel per leaf)")
        P = int(off[-1])
        for k in ("center_", "weight_", "h_"):
            v = arrays[k]
            if v.dtype.kind != "f" or v.shape != (P,) or not np.isfinite(v).all():
                raise ValueError(f"{name}.{k} must be {P} finite floats (one per kernel)")
        if (arrays["weight_"] <= 0).any():
            raise ValueError(f"{name}.weight_ must be > 0")
        for k in ("lo_", "hi_", "count_"):
            v = arrays[k]
            if v.dtype.kind != "f" or v.shape != (n_leaves,) or np.isnan(v).any():
                raise ValueError(f"{name}.{k} must be {n_leaves} floats (one per leaf)")
        if not (np.isfinite(arrays["h_"]).all() and (arrays["h_"] > 0).all()):
            raise ValueError(f"{name}.h_ must be finite and > 0")
        if (arrays["lo_"] > arrays["hi_"]).any():
            raise ValueError(f"{name}: every cell needs lo_ <= hi_")
        cell = np.repeat(np.arange(n_leaves), np.diff(off))
        c = arrays["center_"]
        if ((c < arrays["lo_"][cell]) | (c > arrays["hi_"][cell])).any() or (
                arrays["h_"] > MAX_MAGNITUDE).any():
            raise ValueError(f"{name}: every kernel needs its centre inside its leaf's cell "
                             f"and a bandwidth below 2**1020")

    # ------------------------------------------------------------------ densities
    def log_prob(self, leaf, x):
        return _kernel_log_prob(self.offset_, self.center_, self.const_, self.h_, self.lo_,
                                self.hi_, np.asarray(leaf, np.int64),
                                np.asarray(x, np.float64))

    def n_components(self, leaf) -> np.ndarray:
        """The number of kernels of each leaf (its training rows)."""
        leaf = np.asarray(leaf, np.int64)
        return self.offset_[leaf + 1] - self.offset_[leaf]

    def _pairs(self, leaf, lo, hi):
        """Chunks ``(sel, first, rep, k, a, b, lm)`` of (entry, kernel) pairs: entries ``sel``,
        the first pair of each entry, each pair's entry (in ``sel``) and kernel, the bounds
        ``a, b`` of ``(lo, hi]`` within the cell in the kernel's units, and the kernel's log
        share of the leaf's mass there."""
        leaf = np.asarray(leaf, np.int64)
        lo = np.broadcast_to(np.asarray(lo, np.float64), leaf.shape)
        hi = np.broadcast_to(np.asarray(hi, np.float64), leaf.shape)
        cnt = self.offset_[leaf + 1] - self.offset_[leaf]
        ends = np.cumsum(cnt)
        start = 0
        while start < len(leaf):
            stop = int(np.searchsorted(ends, ends[start] - cnt[start] + PAIR_BUDGET, "right"))
            sel = np.arange(start, min(max(stop, start + 1), len(leaf)))
            c = cnt[sel]
            rep = np.repeat(np.arange(len(sel)), c)
            first = np.cumsum(c) - c
            k = self.offset_[leaf[sel]][rep] + np.arange(len(rep)) - first[rep]
            h = self.h_[k]
            with np.errstate(invalid="ignore"):
                a = np.maximum(self.a_[k], (lo[sel][rep] - self.center_[k]) / h)
                b = np.maximum(a, np.minimum(self.b_[k], (hi[sel][rep] - self.center_[k]) / h))
                lm = np.log(self.weight_[k]) + log_ndtr_diff(a, b) - self.logz_[k]
            lm = np.where(np.isfinite(self.logz_[k]), lm, -np.inf)
            yield sel, first, rep, k, a, b, lm
            start = int(sel[-1]) + 1

    def log_prob_interval(self, leaf, lo, hi):
        leaf = np.asarray(leaf, np.int64)
        out = np.empty(len(leaf))
        for sel, first, rep, _, _, _, lm in self._pairs(leaf, lo, hi):
            out[sel] = _segment_logsumexp(lm, first, rep)
        # a zero-width cell has no mass; an interval covering the whole cell has mass 1
        lo = np.broadcast_to(np.asarray(lo, np.float64), leaf.shape)
        hi = np.broadcast_to(np.asarray(hi, np.float64), leaf.shape)
        cl, ch = self.lo_[leaf], self.hi_[leaf]
        whole = (lo <= cl) & (hi >= ch) & (ch > cl)
        return np.where(whole, 0.0, np.minimum(out, 0.0))

    def mean(self, leaf):
        return self.mean_[np.asarray(leaf, np.int64)]

    def mean_interval(self, leaf, lo, hi):
        leaf = np.asarray(leaf, np.int64)
        lo = np.broadcast_to(np.asarray(lo, np.float64), leaf.shape)
        hi = np.broadcast_to(np.asarray(hi, np.float64), leaf.shape)
        out = np.empty(len(leaf))
        for sel, first, rep, k, a, b, lm in self._pairs(leaf, lo, hi):
            top = np.maximum.reduceat(lm, first)
            rel = np.exp(lm - np.where(np.isfinite(top), top, 0.0)[rep])
            km = self.center_[k] + self.h_[k] * std_truncnorm_mean(a, b)
            tot = np.add.reduceat(rel, first)
            with np.errstate(invalid="ignore", divide="ignore"):
                out[sel] = np.add.reduceat(rel * km, first) / tot
        bad = ~np.isfinite(out)
        if bad.any():  # no mass in the interval: the leaf's mean, kept inside it
            with np.errstate(invalid="ignore"):
                out[bad] = np.clip(self.mean_[leaf[bad]], lo[bad], hi[bad])
        return out

    # ------------------------------------------------------------------ sampling
    def sample(self, leaf, rng, lo=None, hi=None, levels=None):
        leaf = np.asarray(leaf, np.int64)
        m = len(leaf)
        if lo is None and hi is None:  # a kernel by its weight, then a draw inside the cell
            k = np.searchsorted(self.cum_, leaf + rng.random(m), side="right")
            k = np.clip(k, self.offset_[leaf], self.offset_[leaf + 1] - 1)
            a, b = self.a_[k], self.b_[k]
            low, high = self.lo_[leaf], self.hi_[leaf]
        else:  # a kernel by its mass inside the interval (Gumbel-max), by its weight if none
            lo_ = np.full(m, -np.inf) if lo is None else np.broadcast_to(
                np.asarray(lo, np.float64), m)
            hi_ = np.full(m, np.inf) if hi is None else np.broadcast_to(
                np.asarray(hi, np.float64), m)
            k = np.empty(m, np.int64)
            a, b = np.empty(m), np.empty(m)
            for sel, first, rep, kk, aa, bb, lm in self._pairs(leaf, lo_, hi_):
                none = (np.maximum.reduceat(lm, first) == -np.inf)[rep]
                g = np.where(none, np.log(self.weight_[kk]), lm) + rng.gumbel(size=len(lm))
                best = np.lexsort((-g, rep))
                pick = best[np.r_[True, rep[best][1:] != rep[best][:-1]]]
                k[sel], a[sel], b[sel] = kk[pick], aa[pick], bb[pick]
            low = np.maximum(self.lo_[leaf], lo_)
            high = np.minimum(self.hi_[leaf], hi_)
        x = self.center_[k] + self.h_[k] * sample_std_truncnorm(a, np.maximum(a, b),
                                                                  rng.random(m))
        with np.errstate(invalid="ignore"):
            return np.clip(x, np.minimum(np.nextafter(low, np.inf), high), high)


def _leaf_iqr(kc, kw, kl, cnt, L) -> np.ndarray:
    """Each leaf's interquartile range of its values ``kc`` (sorted within the leaf
    ``kl``, weights ``kw``): the first values at cumulative shares 1/4 and 3/4 (0 for a leaf
    without values)."""
    off = np.r_[0, np.cumsum(np.bincount(kl, minlength=L))].astype(np.int64)
    cum = np.cumsum(kw)
    base = np.r_[0.0, cum][off[:-1]]
    share = (cum - base[kl]) / np.maximum(cnt[kl], 1e-300)
    key = kl + np.minimum(share, 1.0)  # sorted: by leaf, then by share in (0, 1]
    full = np.flatnonzero(np.diff(off) > 0)
    last = off[full + 1] - 1
    q1 = np.minimum(np.searchsorted(key, full + 0.25), last)
    q3 = np.minimum(np.searchsorted(key, full + 0.75), last)
    out = np.zeros(L)
    out[full] = kc[q3] - kc[q1]
    return out


def _abramson(kc: np.ndarray, kw: np.ndarray, kl: np.ndarray, h: np.ndarray, L: int
              ) -> np.ndarray:
    """Abramson's (1982) width factors ``(f(v_i) / g) ** -1/2`` of kernels at ``kc`` (sorted
    within each leaf ``kl``, weights ``kw``): ``f`` the leaf's fixed-width kernel estimate
    (normals of width ``h[leaf]``, untruncated) at each centre, ``g`` the weighted geometric
    mean of ``f`` over the leaf, the factors clipped to ``[1/20, 20]``; 1 in a leaf of one
    centre."""
    f = _pilot(kc, kw, kl, h)
    lf = np.log(np.maximum(f, 1e-300))
    tot = np.bincount(kl, weights=kw, minlength=L)
    lg = np.divide(np.bincount(kl, weights=kw * lf, minlength=L), tot, out=np.zeros(L),
                   where=tot > 0)
    return np.clip(np.exp(-0.5 * (lf - lg[kl])), 0.05, 20.0)


@njit(cache=True)
def _pilot(kc, kw, kl, h):
    """Fixed-width normal kernel estimate of each leaf at its own centres (``kc`` sorted
    within each leaf; kernels past 8 widths left out, below 1e-13 of their weight)."""
    n = len(kc)
    out = np.zeros(n)
    lo = 0
    for i in range(n):
        li = kl[i]
        hw = h[li]
        while kl[lo] != li or kc[lo] < kc[i] - 8.0 * hw:
            lo += 1
        acc = 0.0
        j = lo
        while j < n and kl[j] == li and kc[j] <= kc[i] + 8.0 * hw:
            z = (kc[j] - kc[i]) / hw
            acc += kw[j] * math.exp(-0.5 * z * z)
            j += 1
        out[i] = acc / hw
    return out


def _shrink(h: np.ndarray, var: np.ndarray) -> np.ndarray:
    """Silverman & Young's factor ``(1 + h**2 / var) ** -1/2`` (1 where ``var`` is 0)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(var > 0, 1.0 / np.sqrt(1.0 + h * h / np.where(var > 0, var, 1.0)), 1.0)


def _segment_cumsum(w: np.ndarray, offset: np.ndarray) -> np.ndarray:
    """Cumulative weights within each leaf's segment, the last one exactly 1."""
    c = np.cumsum(w)
    base = np.r_[0.0, c][offset[:-1]]
    n = np.diff(offset)
    out = c - np.repeat(base, n)
    last = offset[1:][n > 0] - 1
    out[last] = 1.0
    return out


def _segment_logsumexp(lm: np.ndarray, first: np.ndarray, rep: np.ndarray) -> np.ndarray:
    top = np.maximum.reduceat(lm, first)
    safe = np.where(np.isfinite(top), top, 0.0)
    s = np.add.reduceat(np.exp(lm - safe[rep]), first)
    with np.errstate(divide="ignore"):
        return np.log(s) + safe


def _loo_factor(x, leaf, w, group, kc, kw, offset, lo, hi, scale, res, cnt, mean, var_b,
                dcen, dwid, eps) -> float:
    """The factor of :data:`FACTORS` with the largest leave-one-out log-probability of the
    fitting values' resolution cells (module docstring); ties go to the wider bandwidth.
    ``group``: each value's kernel (its distinct (leaf, value) pair) among ``kc, kw``."""
    rows = np.flatnonzero(cnt[leaf] - w > 0)  # values with others in their leaf
    if len(rows) == 0:
        return 1.0
    if len(rows) > LOO_ROWS:
        rows = np.sort(np.random.default_rng(0).choice(rows, LOO_ROWS, replace=False))
    f = np.asarray(FACTORS, np.float64)
    scores = _loo_scores(LooKernels(offset, kc, kw),
                         LooLeaves(lo, hi, scale, cnt, mean, var_b, dcen, dwid),
                         LooRows(leaf[rows], x[rows], w[rows], group[rows].astype(np.int64)),
                         float(res), float(eps), f)
    total = scores.sum(0)
    if not np.isfinite(total.max()):
        return 1.0
    best = np.flatnonzero(total >= total.max() - 1e-9 * abs(total.max()))
    return float(f[best[-1]])


class LooKernels(NamedTuple):
    """The fitting values' kernels: leaf ``l``'s are ``offset[l]:offset[l + 1]`` of
    ``center`` and ``weight``."""

    offset: np.ndarray
    center: np.ndarray
    weight: np.ndarray


class LooLeaves(NamedTuple):
    """Per leaf: cell ``(lo, hi]``, bandwidth scale, weighted count, mean, variance (for the
    shrink factor), and the defensive kernel's centre and width."""

    lo: np.ndarray
    hi: np.ndarray
    scale: np.ndarray
    cnt: np.ndarray
    mean: np.ndarray
    var_b: np.ndarray
    dcen: np.ndarray
    dwid: np.ndarray


class LooRows(NamedTuple):
    """The scored values: leaf, value, weight and own kernel (left out of its leaf's sum)."""

    leaf: np.ndarray
    x: np.ndarray
    w: np.ndarray
    kern: np.ndarray


@njit(cache=True)
def _ndtr_diff(a: float, b: float) -> float:
    """Phi(b) - Phi(a) for a <= b, accurate in both tails."""
    r = 0.7071067811865476
    if b - a < 1e-7 * max(1.0, abs(a)):
        z = 0.5 * (a + b)
        return (b - a) * math.exp(-0.5 * z * z) * 0.3989422804014327
    if a > 0.0:
        return 0.5 * (math.erfc(a * r) - math.erfc(b * r))
    if b < 0.0:
        return 0.5 * (math.erfc(-b * r) - math.erfc(-a * r))
    return 1.0 - 0.5 * math.erfc(-a * r) - 0.5 * math.erfc(b * r)


@parallel_kernel
def _loo_scores(kernels, leaves, rows, res, eps, factors):
    """``[rows, factors]``: log P(value's resolution cell | the other values of its leaf),
    ``res > 0`` (:class:`LooKernels`, :class:`LooLeaves`, :class:`LooRows`)."""
    offset, center, weight = kernels
    lo, hi, scale, cnt, mean, var_b, dcen, dwid = leaves
    leaf, x, w, kern = rows
    R, F = x.shape[0], factors.shape[0]
    out = np.empty((R, F))
    for i in prange(R):
        lf = leaf[i]
        v = x[i]
        for f in range(F):
            h = factors[f] * scale[lf]
            k = 1.0 / math.sqrt(1.0 + h * h / var_b[lf]) if var_b[lf] > 0.0 else 1.0
            h = k * h
            acc = 0.0
            for j in range(offset[lf], offset[lf + 1]):
                wj = weight[j] - w[i] if j == kern[i] else weight[j]
                if wj <= 0.0:
                    continue
                cj = mean[lf] + k * (center[j] - mean[lf])
                a = (lo[lf] - cj) / h
                b = (hi[lf] - cj) / h
                z = _ndtr_diff(a, b)
                lo_c = max(a, (v - 0.5 * res - cj) / h)
                hi_c = min(b, (v + 0.5 * res - cj) / h)
                if z <= 0.0 or hi_c <= lo_c:
                    continue
                p = _ndtr_diff(lo_c, hi_c)
                acc += wj * p / z
            p = (1.0 - eps) * acc / (cnt[lf] - w[i])
            if eps > 0.0:  # the defensive kernel
                a = (lo[lf] - dcen[lf]) / dwid[lf]
                b = (hi[lf] - dcen[lf]) / dwid[lf]
                lo_c = max(a, (v - 0.5 * res - dcen[lf]) / dwid[lf])
                hi_c = min(b, (v + 0.5 * res - dcen[lf]) / dwid[lf])
                z = _ndtr_diff(a, b)
                if z > 0.0 and hi_c > lo_c:
                    p += eps * _ndtr_diff(lo_c, hi_c) / z
            out[i, f] = math.log(p) if p > 0.0 else -np.inf
    return out


@parallel_kernel
def _kernel_log_prob(offset, center, const, h, lo, hi, leaf, x):
    """Log density of the truncated kernel mixture; NaN x -> 0, -inf outside the cell."""
    out = np.empty(x.shape[0])
    for i in prange(x.shape[0]):
        v = x[i]
        if np.isnan(v):
            out[i] = 0.0
            continue
        k = leaf[i]
        if not (v > lo[k] and v <= hi[k]):
            out[i] = -np.inf
            continue
        top = -np.inf
        for j in range(offset[k], offset[k + 1]):
            t = (v - center[j]) / h[j]
            s = const[j] - 0.5 * t * t
            if s > top:
                top = s
        if top == -np.inf:
            out[i] = -np.inf
            continue
        acc = 0.0
        for j in range(offset[k], offset[k + 1]):
            t = (v - center[j]) / h[j]
            acc += math.exp(const[j] - 0.5 * t * t - top)
        out[i] = top + math.log(acc)
    return out
