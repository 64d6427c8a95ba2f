"""A rounded normal tail for the level pmfs of integer columns (R arf's shape, issue 19).

R arf models an integer column in a leaf by a normal fitted to the leaf's values, truncated to
the leaf's cell; rounded to the integers, it gives the integers next to the ones a small leaf
saw a share of the leaf's mass. forestgen codes integer scales as levels, so a 5-row leaf's
pmf sits on the few values it saw. This module holds the component that gives them their
share: per leaf, the normal ``N(mu, sd)`` fitted to the leaf's level codes (``mu`` their mean,
``sd**2`` their sample variance, ``N - 1`` divisor as R's ``sd``, plus ``1/12``, the variance a
value spread uniformly over its unit cell adds, so a leaf whose rows share one value still has
``sd = sqrt(1/12) = 0.289``), rounded to the levels (level ``c`` gets the normal's mass on
``(c - 1/2, c + 1/2]``) and restricted to the levels the leaf's cell allows, normalised by
their total mass ``z``. A leaf of ``N`` rows mixes it into its pmf ``p`` with weight
``w = tail / (N + tail)``: ``(1 - w) p(c) + w q(c)``. The result is exactly normalised over
the allowed levels, and the levels a leaf saw keep at least ``1 - w`` of their shares (point
masses such as a column of zeros stay). Codes are the level indices, so on a column coded as
its observed values (a spiky one) the normal is over ranks, not values.

:class:`RoundedNormalTailLeaf` is :class:`~forestgen.leaves.ordinal_kernel.OrdinalKernelLeaf`
with this component (ARF's ``integer_tail``); ``tail=0`` gives the ordinal-kernel leaf's pmf.

Storage: four floats per leaf (``w``, ``mu``, ``sd``, ``z``); the queries evaluate the normal
on the fly (no dense leaf x level table).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from numba import njit, prange
from scipy.special import erfc

from forestgen.leaves.base import LEVEL_BUDGET
from forestgen.leaves.categorical import level_allowed, level_prob
from forestgen.leaves.ordinal_kernel import OrdinalKernelLeaf
from forestgen.parallel import parallel_kernel
from forestgen.registry import register
from forestgen.validation import check_real

#: names of the per-leaf arrays of the component (float64 ``[L]`` each)
TAIL_ARRAYS = ("tail_w_", "tail_mu_", "tail_sd_", "tail_z_")


def fit_tail(codes: np.ndarray, leaf: np.ndarray, weight: np.ndarray | None,
             allowed: np.ndarray, tail: float) -> dict[str, np.ndarray]:
    """The component's arrays for the leaves of ``allowed`` (bool ``[L, k]``) from valid
    (code, leaf) pairs inside their cells (``weight``: frequency weights or None). A leaf with
    no rows gets ``w = 0``."""
    L, k = allowed.shape
    w = np.ones(len(codes)) if weight is None else np.asarray(weight, float)
    s0 = np.bincount(leaf, weights=w, minlength=L)
    s1 = np.bincount(leaf, weights=w * codes, minlength=L)
    mu = s1 / np.where(s0 > 0, s0, 1.0)
    dev = codes - mu[leaf]
    ss = np.bincount(leaf, weights=w * dev * dev, minlength=L)
    var = np.where(s0 > 1, ss / np.where(s0 > 1, s0 - 1.0, 1.0), 0.0)
    sd = np.sqrt(var + 1.0 / 12.0)
    z = np.zeros(L)
    step = max(1, LEVEL_BUDGET // k)
    lv = np.arange(k)
    r = 1.0 / np.sqrt(2.0)
    for s in range(0, L, step):
        e = min(L, s + step)
        a = (lv[None, :] - 0.5 - mu[s:e, None]) / sd[s:e, None]
        b = (lv[None, :] + 0.5 - mu[s:e, None]) / sd[s:e, None]
        # as the kernels' _cell_mass: on the side of the smaller tail
        mass = np.where(a > 0, 0.5 * (erfc(a * r) - erfc(b * r)),
                        0.5 * (erfc(-b * r) - erfc(-a * r)))
        z[s:e] = (mass * allowed[s:e]).sum(1)
    wt = np.where((s0 > 0) & (z > 1e-300), tail / (s0 + tail), 0.0) if tail > 0 else \
        np.zeros(L)
    return {"tail_w_": wt, "tail_mu_": mu, "tail_sd_": sd, "tail_z_": np.where(wt > 0, z, 1.0)}


def check_tail_arrays(name: str, arrays: dict, n_leaves: int) -> None:
    """Raise ``ValueError`` unless ``arrays`` holds the component's arrays for ``n_leaves``."""
    for nm in TAIL_ARRAYS:
        v = arrays[nm]
        if (not isinstance(v, np.ndarray) or v.dtype.kind != "f" or v.shape != (n_leaves,)
                or not np.isfinite(v).all()):
            raise ValueError(f"{name}.{nm} must be {n_leaves} finite floats (one per leaf)")
    w, sd, z = arrays["tail_w_"], arrays["tail_sd_"], arrays["tail_z_"]
    if np.any((w < 0) | (w >= 1)) or np.any((w > 0) & ((sd <= 0) | (z <= 0) | (z > 1 + 1e-9))):
        raise ValueError(f"{name}: tail_w_ must be in [0, 1), and tail_sd_ > 0 and tail_z_ in "
                         f"(0, 1] where tail_w_ > 0")


@register("leaf", "rounded_normal_tail")
class RoundedNormalTailLeaf(OrdinalKernelLeaf):
    """:class:`~forestgen.leaves.ordinal_kernel.OrdinalKernelLeaf` mixed with the rounded
    normal of each leaf's own rows (module docstring).

    Parameters
    ----------
    tail : pseudo-count ``c >= 0`` (default 10): a leaf of ``N`` rows gives the rounded normal
        weight ``c / (N + c)``; 0 keeps the ordinal-kernel pmf.
    bandwidth, alpha, prior, floor : as in
        :class:`~forestgen.leaves.ordinal_kernel.OrdinalKernelLeaf`.
    """

    def __init__(self, *, tail: float = 10.0, bandwidth: float = 0.5, alpha: float = 0.0,
                 floor: float = 1e-20, prior: float = 0.0):
        super().__init__(bandwidth=bandwidth, alpha=alpha, floor=floor, prior=prior)
        self.tail = tail

    def fit(self, x, leaf, cell, weight=None):
        check_real("tail", self.tail, 0.0, np.inf, high_open=True)
        for nm in TAIL_ARRAYS:  # a refit starts without the component
            setattr(self, nm, None)
        super().fit(x, leaf, cell, weight)
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

    @property
    def _has_tail(self) -> bool:
        return getattr(self, "tail_w_", None) is not None

    def _tail_tables(self) -> TailTables:
        return TailTables(*self._tables(), *(getattr(self, nm) for nm in TAIL_ARRAYS))

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
        return tail_log_prob(self._tail_tables(), np.asarray(leaf, np.int64),
                             np.asarray(x, np.float64), self.n_levels, float(self.floor))

    def log_prob_levels(self, leaf, levels):
        if not self._has_tail:
            return super().log_prob_levels(leaf, levels)
        levels = np.asarray(levels, bool)
        lv2 = levels[None, :] if levels.ndim == 1 else levels
        p = tail_level_mass(self._tail_tables(), np.asarray(leaf, np.int64),
                            np.ascontiguousarray(lv2), levels.ndim == 1)
        with np.errstate(divide="ignore"):
            return np.log(p)

    def probs(self, leaf):
        if not self._has_tail:
            return super().probs(leaf)
        return tail_dense_rows(self._tail_tables(), np.asarray(leaf, np.int64), self.n_levels)

    def mean(self, leaf):
        if not self._has_tail:
            return super().mean(leaf)
        return tail_mean(self._tail_tables(), np.asarray(leaf, np.int64), self.n_levels)

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
        return tail_sample(self._tail_tables(), np.asarray(leaf, np.int64), u, lv, shared, k)


# ------------------------------------------------------------------------------- kernels
class TailTables(NamedTuple):
    """A leaf model's level tables (the categorical leaf's sparse pmfs: ``offset``, ``code``,
    ``prob``, ``rest``, ``bits``, ``base``) and its tail: weight, normal mean and SD, and the
    normal's mass on the cell's levels, per leaf."""

    offset: np.ndarray
    code: np.ndarray
    prob: np.ndarray
    rest: np.ndarray
    bits: np.ndarray
    base: np.ndarray
    tw: np.ndarray
    tmu: np.ndarray
    tsd: np.ndarray
    tz: np.ndarray


@njit(cache=True, inline="always")
def _cell_mass(mu, sd, c):
    """P(c - 1/2 < X <= c + 1/2) for X ~ N(mu, sd), computed on the side of the smaller tail."""
    a = (c - 0.5 - mu) / sd
    b = (c + 0.5 - mu) / sd
    r = 1.0 / math.sqrt(2.0)
    if a > 0.0:
        return 0.5 * (math.erfc(a * r) - math.erfc(b * r))
    return 0.5 * (math.erfc(-b * r) - math.erfc(-a * r))


@njit(cache=True, inline="always")
def _mix(t, leaf, c, k):
    """p(level c | leaf) of the mixture (0 on a level the cell excludes); ``t``: the leaf's
    :class:`TailTables`."""
    offset, code, prob, rest, bits, base, tw, tmu, tsd, tz = t
    p = level_prob(offset, code, prob, rest, bits, base, leaf, c)
    w = tw[leaf]
    if w > 0.0 and level_allowed(bits, leaf, c):
        return (1.0 - w) * p + w * _cell_mass(tmu[leaf], tsd[leaf], c) / tz[leaf]
    return p


@parallel_kernel
def tail_log_prob(t, leaf, x, k, floor):
    """log p(x | leaf); NaN -> 0; a level of mass at most ``floor`` -> log floor; codes
    outside 0..k-1 or non-integer (outside the support) -> -inf."""
    out = np.empty(x.shape[0])
    log_floor = np.log(floor) if floor > 0 else -np.inf
    for i in prange(x.shape[0]):
        v = x[i]
        if np.isnan(v):
            out[i] = 0.0
        else:
            c = int(v)
            if c == v and 0 <= c < k:
                p = _mix(t, leaf[i], c, k)
                out[i] = np.log(p) if p > floor else log_floor
            else:
                out[i] = -np.inf
    return out


@parallel_kernel
def tail_level_mass(t, leaf, levels, shared):
    """P(X in levels[i] | leaf[i]) (``levels`` is ``[1, k]`` when ``shared``)."""
    m = leaf.shape[0]
    k = levels.shape[1]
    out = np.empty(m)
    for i in prange(m):
        r = np.int64(0) if shared else np.int64(i)
        s = 0.0
        for c in range(k):
            if levels[r, c]:
                s += _mix(t, leaf[i], c, k)
        out[i] = s
    return out


@parallel_kernel
def tail_dense_rows(t, leaf, k):
    """The pmf of each queried leaf as dense rows ``[m, k]``."""
    m = leaf.shape[0]
    out = np.zeros((m, k))
    for i in prange(m):
        for c in range(k):
            out[i, c] = _mix(t, leaf[i], c, k)
    return out


@parallel_kernel
def tail_mean(t, leaf, k):
    m = leaf.shape[0]
    out = np.empty(m)
    for i in prange(m):
        s = 0.0
        for c in range(k):
            s += c * _mix(t, leaf[i], c, k)
        out[i] = s
    return out


@parallel_kernel
def tail_sample(t, leaf, u, levels, shared, k):
    """Inverse-CDF draw over the levels in code order, restricted to ``levels``."""
    m = leaf.shape[0]
    out = np.empty(m)
    for i in prange(m):
        r = np.int64(0) if shared else np.int64(i)
        lf = leaf[i]
        tot = 0.0
        for c in range(k):
            if levels[r, c]:
                tot += _mix(t, lf, c, k)
        target = u[i] * tot
        cdf = 0.0
        pick = k - 1
        for c in range(k):
            if levels[r, c]:
                cdf += _mix(t, lf, c, k)
            if cdf >= target:
                pick = c
                break
        out[i] = pick
    return out
