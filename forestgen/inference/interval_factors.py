"""In-kernel leaf factors of interval and level-set evidence (issue 15).

Under evidence ``e`` a leaf weighs ``pi_k prod_{j in E} g_kj(e_j)`` (ARF spec §3;
:mod:`forestgen.inference.posterior`): a density for a point value, and for an interval
``(lo, hi]`` or a level set ``S`` the probability ``P_k(X_j in e_j) <= 1``. The fused walks of
:mod:`.leaf_search` and :mod:`.evidence_mass` score a leaf on all of a row's evidence columns
as they reach it: :func:`row_log_weight` adds to :func:`~.leaf_factors.leaf_log_weight` (the
point columns) the interval and level-set factors, computed from the packed leaf records of
:class:`~.leaf_factors.LeafPack` with the operations of :meth:`TruncNormalLeaf.log_prob_interval`
(truncated-normal CDF differences in log space), :meth:`UniformLeaf.log_prob_interval` and
:meth:`CategoricalLeaf.log_prob_levels`; they agree with those to rounding (~1e-15). Leaf models
whose interval or level-set mass lives elsewhere (point masses, rounded-normal tails, user
subclasses that declare none) are left to the per-column paths (:func:`kernel_columns`).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from forestgen.inference.conditions import Evidence
from forestgen.inference.leaf_factors import (
    CATEGORICAL,
    KIND,
    NLEV,
    POS,
    REC,
    START,
    TRUNCNORM,
    UNIFORM,
    add_pmf,
    leaf_kind,
    leaf_log_weight,
    listed_levels,
)
from forestgen.leaves.normal_math import LOG_SQRT_2PI

SQRT1_2 = 1.0 / math.sqrt(2.0)


def kernel_columns(model) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """bool ``[d]`` each: columns whose point, interval and level-set evidence the in-kernel
    factors weigh exactly as the leaf model's own ``log_prob`` / ``log_prob_interval`` /
    ``log_prob_levels`` (the factors the leaf model's class declares,
    :attr:`~forestgen.leaves.base.LeafModel.packed_factors`)."""
    point, iv, sets = [], [], []
    for lm in model.leaf_models_:
        kd, facs = leaf_kind(lm), lm.packed_factors
        point.append(kd > 0)
        iv.append(kd in (TRUNCNORM, UNIFORM) and "interval" in facs)
        sets.append(kd == CATEGORICAL and "levels" in facs)
    return np.array(point, bool), np.array(iv, bool), np.array(sets, bool)


def kernel_rows(model, ev: Evidence, rows: np.ndarray) -> np.ndarray:
    """bool per row of ``rows``: every piece of the row's evidence has an in-kernel factor."""
    point, iv, sets = kernel_columns(model)
    rows = np.asarray(rows, np.int64)
    ok = ~(~np.isnan(ev.point[rows]) & ~point).any(1)
    ok &= ~(~np.isnan(ev.lo[rows]) & ~iv).any(1)
    for j, (a, _) in ev.sets.items():
        if not sets[j]:
            ok &= ~a[rows]
    return ok


def evidence_arrays(ev: Evidence, rows: np.ndarray) -> tuple:
    """The interval and level-set evidence of ``rows`` as kernel arrays ``(lo, hi, sact,
    smask, soff, sk)`` (the layout of :func:`~forestgen.tree.kernels.evidence_sides`; ``[0,
    d]`` arrays where the rows have none of a kind)."""
    rows = np.asarray(rows, np.int64)
    n, d = len(rows), ev.d
    lo, hi = ev.lo[rows], ev.hi[rows]
    if np.isnan(lo).all():
        lo = hi = np.zeros((0, d))
    soff, sk = np.zeros(d, np.int64), np.zeros(d, np.int64)
    used = {j: s for j, s in ev.sets.items() if s[0][rows].any()}
    if not used:
        return (np.ascontiguousarray(lo), np.ascontiguousarray(hi), np.zeros((0, d), bool),
                np.zeros((n, 0), bool), soff, sk)
    sact = np.zeros((n, d), bool)
    parts, acc = [], 0
    for j, (a, mk) in sorted(used.items()):
        sact[:, j] = a[rows]
        soff[j], sk[j] = acc, mk.shape[1]
        acc += mk.shape[1]
        parts.append(np.broadcast_to(mk, (ev.m, mk.shape[1]))[rows])
    smask = np.ascontiguousarray(np.concatenate(parts, axis=1), bool)
    return (np.ascontiguousarray(lo), np.ascontiguousarray(hi), sact, smask, soff, sk)


# ----------------------------------------------------------------------------- normal CDF


@njit(cache=True, nogil=True, error_model="numpy")
def log_ndtr(x):
    """``log Phi(x)`` of the standard normal (relative accuracy ~1e-15 in both tails)."""
    if x > 0.0:
        return math.log1p(-0.5 * math.erfc(x * SQRT1_2))
    if x > -30.0:
        return math.log(0.5 * math.erfc(-x * SQRT1_2))
    # asymptotic series: Phi(x) = phi(x) / -x * sum_k (-1)^k (2k-1)!! / x^(2k)
    t = 1.0 / (x * x)
    s = 1.0
    term = 1.0
    for k in range(1, 12):
        term *= -(2 * k - 1) * t
        s += term
    return -0.5 * x * x - math.log(-x) - LOG_SQRT_2PI + math.log(s)


@njit(cache=True, nogil=True, error_model="numpy")
def log_ndtr_diff(a, b):
    """``log(Phi(b) - Phi(a))`` for ``a <= b`` (``-inf`` when ``a == b``), as
    :func:`forestgen.leaves.normal_math.log_ndtr_diff`: mirrored onto the lower tail."""
    if not b > a:
        return -np.inf
    lo, hi = (-b, -a) if a > 0 else (a, b)
    llo = log_ndtr(lo)
    lhi = log_ndtr(hi)
    d = min(llo - lhi, 0.0)
    if d > -math.log(2.0):
        return lhi + math.log(-math.expm1(d))
    return lhi + math.log1p(-math.exp(d))


# ----------------------------------------------------------------------------- leaf factors


@njit(cache=True, nogil=True, inline="always")
def _truncnorm_interval(rec, p, lo, hi):
    """``log P(lo < X <= hi)`` under the truncated normal at word ``p`` of the records (fields
    ``lo_, hi_, mu, sigma, lognorm``), as :meth:`TruncNormalLeaf.log_prob_interval`."""
    mu = rec[p + 2]
    sd = rec[p + 3]
    logz = rec[p + 4] - (math.log(sd) + LOG_SQRT_2PI)
    if not np.isfinite(logz):
        return -np.inf  # a zero-width cell has no mass
    za = (lo - mu) / sd
    zb = (hi - mu) / sd
    ca = (rec[p] - mu) / sd
    cb = (rec[p + 1] - mu) / sd
    if not (za > ca or zb < cb):
        return 0.0  # the interval covers the cell
    a = max(za, ca)
    return log_ndtr_diff(a, max(a, min(zb, cb))) - logz


@njit(cache=True, nogil=True, error_model="numpy")
def row_log_weight(i, r, ev, ecols, ne, icols, ni, scols, ns, tabs, scratch):
    """``log pi + sum_j log g_j`` of packed leaf record ``r`` under row ``i``'s evidence
    (:class:`~forestgen.tree.kernels.EvidenceRows`): point values ``X[i, ecols[:ne]]``
    (:func:`leaf_log_weight`), intervals ``(lo, hi][i, icols[:ni]]`` and level sets
    ``smask[i, soff[j]:]`` of columns ``scols[:ns]`` (:func:`range_log_factor`).
    ``scratch [1, k_max]``: zeros (left as zeros)."""
    lp = leaf_log_weight(i, r, ev.X, ecols, ne, tabs)
    if lp == -np.inf:
        return lp
    return range_log_factor(lp, i, r, ev, icols, ni, scols, ns, tabs, scratch)


@njit(cache=True, nogil=True, error_model="numpy")
def range_log_factor(lp, i, r, ev, icols, ni, scols, ns, tabs, scratch):
    """``lp`` plus the log factors of packed leaf record ``r`` for row ``i``'s intervals
    ``(lo, hi][i, icols[:ni]]`` and level sets ``smask[i, soff[j]:]`` of columns
    ``scols[:ns]`` (of :class:`~forestgen.tree.kernels.EvidenceRows` ``ev``; ``-inf`` as soon
    as one is zero). ``scratch [1, k_max]``: zeros (left as zeros)."""
    lo, hi, smask, soff = ev.lo, ev.hi, ev.smask, ev.soff
    rec, pos, kind = tabs[REC], tabs[POS], tabs[KIND]
    o = tabs[START][r]  # record r's first word
    for q in range(ni):
        j = icols[q]
        p = o + pos[j]
        if kind[j] == TRUNCNORM:
            lp += _truncnorm_interval(rec, p, lo[i, j], hi[i, j])
        else:  # uniform
            w = min(hi[i, j], rec[p + 1]) - max(lo[i, j], rec[p])
            lp += (math.log(w) if w > 0 else -np.inf) - math.log(rec[p + 1] - rec[p])
        if lp == -np.inf:
            return lp
    nlev = tabs[NLEV]
    for q in range(ns):
        j = scols[q]
        add_pmf(scratch, 0, 0, 1.0, tabs, r, j)
        s = 0.0
        o = soff[j]
        for c in range(nlev[j]):
            if smask[i, o + c]:
                s += scratch[0, c]
            scratch[0, c] = 0.0
        lp += math.log(s) if s > 0 else -np.inf
        if lp == -np.inf:
            return lp
    return lp


# ------------------------------------------------------------------- linear-space leaf factors

TINY = 1e-280  # linear weights below this (or factors in far tails) are scored in log space
LOGZ_MIN = -600.0  # truncated normals with log normaliser below this: scored in log space


@njit(cache=True, nogil=True, inline="always")
def _truncnorm_linear(rec, p, edge, r, t, lo, hi):
    """``P(lo < X <= hi)`` (not its log) under the truncated normal at word ``p`` of the
    records, as :func:`_truncnorm_interval`; ``-1.0`` where it must be taken in log space (far
    tails, tiny normalisers). ``edge[r, t:t + 3]``: ``erfc(|c|/sqrt 2)`` at the cell's
    standardised edges and ``1 / Z`` (:class:`~.evidence_mass.LinearTables`). An evidence edge
    outside the cell clips to the cell's edge, whose tail is stored: a one-sided interval costs
    one ``erfc``, an interval inside the cell two, one covering the cell none."""
    zinv = edge[r, t + 2]
    if not zinv > 0.0:
        return -1.0
    cl = rec[p]
    ch = rec[p + 1]
    inl = lo > cl  # which evidence edges lie inside the cell
    inh = hi < ch
    if not (inl or inh):
        return 1.0  # the interval covers the cell
    if not min(hi, ch) > max(lo, cl):
        return 0.0
    mu = rec[p + 2]
    sd = rec[p + 3]
    a = (max(lo, cl) - mu) / sd  # the standardised ends of the cell's part in the interval
    b = (min(hi, ch) - mu) / sd
    ea = math.erfc(abs(a) * SQRT1_2) if inl else edge[r, t]  # 2 x the tail beyond |a|
    eb = math.erfc(abs(b) * SQRT1_2) if inh else edge[r, t + 1]
    if a >= 0.0:  # both in the upper tail: Q(a) - Q(b)
        dp = 0.5 * (ea - eb)
    elif b <= 0.0:  # both in the lower tail: Phi(b) - Phi(a)
        dp = 0.5 * (eb - ea)
    elif ea + eb < 1.5:  # across 0: 1 - Phi(a) - Q(b), both tails below 3/4
        dp = 1.0 - 0.5 * (ea + eb)
    else:  # both ends near 0: erf keeps its relative accuracy there
        dp = 0.5 * (math.erf(b * SQRT1_2) - math.erf(a * SQRT1_2))
    if not dp >= TINY:
        return -1.0
    return dp * zinv


@njit(cache=True, nogil=True, inline="always")
def row_linear_weight(i, r, ev, icols, ni, scols, ns, tabs, lin, q=0):
    """``pi_r prod_j g_j`` (linear) of packed leaf record ``r`` under row ``i``'s intervals
    ``icols[q, :ni]`` and level sets ``scols[q, :ns]`` (of
    :class:`~forestgen.tree.kernels.EvidenceRows` ``ev``; no point values), the exponential
    of :func:`row_log_weight`; ``-1.0`` where that must score it instead (a factor in a far
    tail, a weight below :data:`TINY`).
    ``lin`` holds ``pi [L]``, ``edge`` and ``slot [d]`` (each truncated-normal column's first
    word in ``edge``): :class:`~.evidence_mass.LinearTables` (in ``RangeTables``). A level set
    sums the leaf's probabilities of its levels in level order, as :func:`row_log_weight`."""
    lo, hi, smask, soff = ev.lo, ev.hi, ev.smask, ev.soff
    pi, edge, slot = lin.pi, lin.edge, lin.slot
    w = pi[r]
    if not w > 0.0:  # a zero weight, or (-1) one too small for linear space
        return 0.0 if w == 0.0 else -1.0
    rec, bits, codes, start, lay, pos, kind = tabs[0], tabs[1], tabs[2], tabs[3], tabs[4], \
        tabs[5], tabs[6]
    base, nlev = tabs[9], tabs[NLEV]
    cpos, bpos = tabs[7], tabs[8]
    o = start[r]
    for k in range(ni):
        j = icols[q, k]
        p = o + pos[j]
        if kind[j] == TRUNCNORM:
            g = _truncnorm_linear(rec, p, edge, r, slot[j], lo[i, j], hi[i, j])
            if g < 0.0:
                return -1.0
        else:  # uniform
            a = rec[p]
            b = rec[p + 1]
            if not b - a > 0.0:
                return -1.0
            g = min(hi[i, j], b) - max(lo[i, j], a)
            g = g / (b - a) if g > 0.0 else 0.0
        if g == 0.0:
            return 0.0
        w *= g
    for k in range(ns):
        j = scols[q, k]
        e, end, cb = listed_levels(codes, lay, cpos, o, j)
        so = soff[j]
        rest = -1.0
        s = 0.0
        for c in range(nlev[j]):
            if e < end and codes[cb + e] == c:
                if smask[i, so + c]:
                    s += np.exp(rec[o + lay[0] + e])
                e += 1
            elif smask[i, so + c] and (bits[8 * o + bpos[j] + (c >> 3)] >> (c & 7)) & 1:
                if rest < 0.0:
                    rest = np.exp(rec[o + pos[j]])
                s += rest * base[j, c]
        if s == 0.0:
            return 0.0
        w *= s
    return w if w >= TINY else -1.0


@njit(cache=True, nogil=True, error_model="numpy")
def row_columns(i, X, lo, sact, ecols, icols, scols):
    """Fill the row's point, interval and level-set columns; returns their counts."""
    d = X.shape[1]
    ne = ni = ns = 0
    for j in range(d):
        if not np.isnan(X[i, j]):
            ecols[ne] = j
            ne += 1
        elif lo.shape[0] > 0 and not np.isnan(lo[i, j]):
            icols[ni] = j
            ni += 1
        elif sact.shape[0] > 0 and sact[i, j]:
            scols[ns] = j
            ns += 1
    return ne, ni, ns


@njit(cache=True, nogil=True, inline="always")
def range_sides(i, n, ev, node, fnode, cat_left, n_levels):
    """Sides a row of :class:`~forestgen.tree.kernels.EvidenceRows` ``ev`` without a point
    value on packed node ``n``'s column takes (as :func:`~forestgen.tree.kernels.evidence_sides`):
    ``1`` left, ``2`` right, ``3`` both (no evidence on the column, or evidence meeting both),
    ``0`` none."""
    lo, hi, sact, smask, soff, sk = ev.lo, ev.hi, ev.sact, ev.smask, ev.soff, ev.sk
    meta = node[n, 1]
    f = (meta >> 3) & 0x1FFFFF
    if lo.shape[0] > 0 and not np.isnan(lo[i, f]):
        t = fnode[n, 0]
        return (1 if lo[i, f] < t else 0) | (2 if hi[i, f] > t else 0)
    if sact.shape[0] == 0 or not sact[i, f]:
        return 3
    nominal = (meta >> 1) & 1
    kf = n_levels[f]
    o = soff[f]
    s = 0
    for c in range(sk[f]):
        if not smask[i, o + c]:
            continue
        if not nominal:
            s |= 1 if c <= fnode[n, 0] else 2
        elif c >= kf:  # a level the split never saw follows nan_left
            s |= 1 if meta & 1 else 2
        else:
            s |= 1 if cat_left[node[n, 0] + c] == 1 else 2
        if s == 3:
            break
    return s
