"""Regions of EOGT's iterative-order law compatible with partial evidence (Nock &
Guillame-Bert 2023, eq. (8); spec ``generative_forests.md`` §3.4, §4.3).

EOGT's law is the star-node walk with branching ``q̂`` taking the trees in order, then a
uniform draw in the final region ``C``, of probability ``Q̂(C) = Π q̂``. A row with missing
entries is compatible with every region the walk reaches when nodes on observed columns follow
the row and nodes on missing columns branch both ways. :func:`approx_regions` enumerates them
in one compiled depth-first walk (an explicit stack of regions), returning per region
``log Q̂``, its box, its leaf in every tree and its log measure on the observed columns, so a
query does O(1) Python work per row. The walk visits the left branch first, so the regions come
in a fixed order.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from numba import njit

from forestgen.sampling.star import TreeGeometry, approx_q, cut_region


class ApproxRegions(NamedTuple):
    """The compatible regions of one row: ``log_q [n]`` (``log Q̂``), boxes ``lo, hi [n, d]``
    and ``mask [n, n_levels_total]`` (bool), ``leaves [n, T]`` (global leaf id per tree, int32)
    and ``log_measure [n]`` (log measure on the row's observed columns, as the density)."""

    log_q: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    mask: np.ndarray
    leaves: np.ndarray
    log_measure: np.ndarray


def approx_regions(g: TreeGeometry, x: np.ndarray, box_lo: np.ndarray, box_hi: np.ndarray,
                   budget: int = 100_000) -> ApproxRegions | None:
    """The regions of EOGT's iterative-order law (§4.3) compatible with the observed entries
    of encoded row ``x`` (NaN = missing): walk the trees in order; a node on an observed column
    follows ``x``, a node on a missing column branches both ways with ``q̂`` and ``1 - q̂``
    (eq. (8)); paths of probability zero are dropped. Empty when ``x`` lies outside the box;
    ``None`` as soon as more than ``budget`` paths are live at once."""
    x = np.asarray(x, np.float64)
    obs = ~np.isnan(x)
    d = len(x)
    T = g.forest.n_trees
    if not _inside_box(g, x, obs, box_lo, box_hi):
        return ApproxRegions(np.zeros(0), np.zeros((0, d)), np.zeros((0, d)),
                             np.zeros((0, g.mask.shape[1]), bool), np.zeros((0, T), np.int32),
                             np.zeros(0))
    status, n, lq, lo, hi, mask, leaf, mu = _regions_kernel(
        np.where(obs, x, 0.0), obs.astype(np.uint8), int(budget), *g.kernel_arrays())
    if status:
        return None
    leaves = g.forest.node_leaf[leaf[:n]].astype(np.int32)
    return ApproxRegions(lq[:n].copy(), lo[:n].copy(), hi[:n].copy(), mask[:n].astype(bool),
                         leaves, mu[:n].copy())


def region_log_measures(g: TreeGeometry, lo: np.ndarray, hi: np.ndarray, mask: np.ndarray,
                        cols) -> np.ndarray:
    """Log measure ``[n]`` of regions (boxes ``[n, d]``, masks ``[n, n_levels_total]``) on the
    columns ``cols``: Lebesgue on ordered columns, counting on nominal ones (as the density)."""
    lo = np.ascontiguousarray(np.atleast_2d(lo), np.float64)
    sel = np.zeros(lo.shape[1], np.uint8)
    sel[np.asarray(cols, np.int64)] = 1
    return _log_measures_kernel(lo, np.ascontiguousarray(np.atleast_2d(hi), np.float64),
                                np.atleast_2d(mask).astype(np.uint8), sel,
                                g.nom_off.astype(np.int64), g.nlev.astype(np.int64))


def _inside_box(g: TreeGeometry, x, obs, box_lo, box_hi) -> bool:
    """Whether the observed entries of ``x`` lie in the box: ordered ones in ``(lo, hi]``,
    nominal ones valid level codes."""
    nom = obs & (g.nom_off >= 0)
    o = obs & (g.nom_off < 0)
    if np.any(x[o] <= box_lo[o]) or np.any(x[o] > box_hi[o]):
        return False
    v = x[nom]
    return bool(np.all((v >= 0) & (v < g.nlev[nom]) & (v == np.floor(v))))


@njit(cache=True, nogil=True)
def _grow_rows(a, n):
    """``a`` with room for at least ``n`` rows (doubling), its rows kept."""
    if n <= a.shape[0]:
        return a
    out = np.empty((max(n, 2 * a.shape[0]),) + a.shape[1:], a.dtype)
    out[: a.shape[0]] = a
    return out


@njit(cache=True, nogil=True)
def _log_measure(lo, hi, mask, sel, nom_off, nlev):
    """Log measure of one region on the selected columns (in column order)."""
    out = 0.0
    for j in range(lo.shape[0]):
        if not sel[j]:
            continue
        if nom_off[j] >= 0:
            cnt = 0
            for v in range(nlev[j]):
                cnt += mask[nom_off[j] + v]
            out += math.log(cnt) if cnt > 0 else -math.inf
        else:
            w = hi[j] - lo[j]
            out += math.log(w) if w > 0 else -math.inf
    return out


@njit(cache=True, nogil=True)
def _log_measures_kernel(lo, hi, mask, sel, nom_off, nlev):
    out = np.empty(lo.shape[0])
    for i in range(lo.shape[0]):
        out[i] = _log_measure(lo[i], hi[i], mask[i], sel, nom_off, nlev)
    return out


@njit(cache=True, nogil=True)
def _regions_kernel(x, obs, budget, feature, threshold, left, right, cat_off, cat_left, roots,
                    weight, share, nlo, nhi, nmask, nom_off, nlev):
    """Depth-first enumeration of :func:`approx_regions`. Returns ``(status, n, log_q, lo, hi,
    mask, leaf_node, log_measure)``, the outputs' first ``n`` rows filled; ``status`` 1 when
    more than ``budget`` paths were live."""
    d = nlo.shape[1]
    M = nmask.shape[1]
    T = roots.shape[0]
    cap = 16
    s_t = np.empty(cap, np.int64)
    s_node = np.empty(cap, np.int64)
    s_lp = np.empty(cap)
    s_lo = np.empty((cap, d))
    s_hi = np.empty((cap, d))
    s_mask = np.empty((cap, M), np.uint8)
    s_leaf = np.empty((cap, T), np.int64)
    o_lp = np.empty(cap)
    o_lo = np.empty((cap, d))
    o_hi = np.empty((cap, d))
    o_mask = np.empty((cap, M), np.uint8)
    o_leaf = np.empty((cap, T), np.int64)
    o_mu = np.empty(cap)
    r0 = roots[0]
    lo = nlo[r0].copy()
    hi = nhi[r0].copy()
    mask = nmask[r0].copy()
    leaf = np.full(T, -1, np.int64)
    s_t[0] = 0
    s_node[0] = r0
    s_lp[0] = 0.0
    s_lo[0] = lo
    s_hi[0] = hi
    s_mask[0] = mask
    s_leaf[0] = leaf
    sp = 1
    n = 0
    n_live = 1
    while sp > 0:
        sp -= 1
        t = s_t[sp]
        node = s_node[sp]
        lp = s_lp[sp]
        lo[:] = s_lo[sp]
        hi[:] = s_hi[sp]
        mask[:] = s_mask[sp]
        leaf[:] = s_leaf[sp]
        while True:
            if feature[node] < 0:
                leaf[t] = node
                t += 1
                if t == T:
                    break
                node = roots[t]
                continue
            j = feature[node]
            q = approx_q(node, feature, threshold, left, right, cat_off, cat_left, weight, share,
                         nom_off, nlev, lo, hi, mask)
            if obs[j]:
                if cat_off[node] >= 0:
                    go_left = cat_left[cat_off[node] + int(x[j])] == 1
                else:
                    go_left = x[j] <= threshold[node]
                p = q if go_left else 1.0 - q
                if p <= 0:
                    lp = -math.inf
                    break
                lp += math.log(p)
                cut_region(node, go_left, feature, threshold, cat_off, cat_left, nom_off, nlev,
                           lo, hi, mask)
                node = left[node] if go_left else right[node]
                continue
            if q < 1:  # the right branch waits on the stack with a copy of the region
                n_live += 1
                if n_live > budget:
                    return 1, n, o_lp, o_lo, o_hi, o_mask, o_leaf, o_mu
                s_t = _grow_rows(s_t, sp + 1)
                s_node = _grow_rows(s_node, sp + 1)
                s_lp = _grow_rows(s_lp, sp + 1)
                s_lo = _grow_rows(s_lo, sp + 1)
                s_hi = _grow_rows(s_hi, sp + 1)
                s_mask = _grow_rows(s_mask, sp + 1)
                s_leaf = _grow_rows(s_leaf, sp + 1)
                s_t[sp] = t
                s_node[sp] = right[node]
                s_lp[sp] = lp + math.log(1.0 - q)
                s_lo[sp] = lo
                s_hi[sp] = hi
                s_mask[sp] = mask
                s_leaf[sp] = leaf
                cut_region(node, False, feature, threshold, cat_off, cat_left, nom_off, nlev,
                           s_lo[sp], s_hi[sp], s_mask[sp])
                sp += 1
            if q <= 0:
                lp = -math.inf
                break
            lp += math.log(q)
            cut_region(node, True, feature, threshold, cat_off, cat_left, nom_off, nlev, lo, hi,
                       mask)
            node = left[node]
        if lp == -math.inf:
            n_live -= 1
            continue
        o_lp = _grow_rows(o_lp, n + 1)
        o_lo = _grow_rows(o_lo, n + 1)
        o_hi = _grow_rows(o_hi, n + 1)
        o_mask = _grow_rows(o_mask, n + 1)
        o_leaf = _grow_rows(o_leaf, n + 1)
        o_mu = _grow_rows(o_mu, n + 1)
        o_lp[n] = lp
        o_lo[n] = lo
        o_hi[n] = hi
        o_mask[n] = mask
        o_leaf[n] = leaf
        o_mu[n] = _log_measure(lo, hi, mask, obs, nom_off, nlev)
        n += 1
    return 0, n, o_lp, o_lo, o_hi, o_mask, o_leaf, o_mu
