"""Regions of EOGT's iterative-order law compatible with partial evidence (Nock &
Guillame-Bert 2023, eq. (8); spec ``generative_forests.md`` §3.4, §4.3).

EOGT's law is the star-node walk with branching ``q̂`` taking the trees in order, then a
uniform draw in the final region ``C``, of probability ``Q̂(C) = Π q̂``. A row with missing
entries is compatible with every region the walk reaches when nodes on observed columns follow
the row and nodes on missing columns branch both ways. :func:`approx_regions` enumerates them
in one compiled depth-first walk (an explicit stack of regions), returning per region
``log Q̂``, its box, its leaf in every tree and its log measure on the observed columns, so a
query does O(1) Python work per row. The walk visits the left branch first, so the regions come
in a fixed order. Inside the walk nominal level sets are 64-bit words
(:meth:`~forestgen.families.intersection.star.TreeGeometry.level_words`): the shares of eq. (8) are
popcounts and a cut is one AND per word.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from numba import njit

from forestgen.families.intersection.star import (
    TreeGeometry,
    branch_q,
    interval_share,
    unpack_levels,
)


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
    lw = g.level_words()
    status, n, lq, lo, hi, words, leaf, mu = _regions_kernel(
        np.where(obs, x, 0.0), obs.astype(np.uint8), int(budget), g.kernel_arrays(), lw)
    if status:
        return None
    mask = unpack_levels(words[:n], g.nom_off, g.nlev, lw.word_off, g.mask.shape[1])
    leaves = g.forest.node_leaf[leaf[:n]].astype(np.int32)
    return ApproxRegions(lq[:n].copy(), lo[:n].copy(), hi[:n].copy(), mask, leaves,
                         mu[:n].copy())


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
    nominal ones valid level codes among the box's levels (a root's mask)."""
    nom = obs & (g.nom_off >= 0)
    o = obs & (g.nom_off < 0)
    if np.any(x[o] <= box_lo[o]) or np.any(x[o] > box_hi[o]):
        return False
    v = x[nom]
    if not np.all((v >= 0) & (v < g.nlev[nom]) & (v == np.floor(v))):
        return False
    return bool(np.all(g.mask[g.forest.roots[0], g.nom_off[nom] + v.astype(np.int64)]))


@njit(cache=True, nogil=True)
def _grow(a):
    """``a`` with twice the rows, its rows kept."""
    out = np.empty((2 * a.shape[0],) + a.shape[1:], a.dtype)
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
def _popcount(x):
    """Number of set bits of a uint64."""
    x = x - ((x >> np.uint64(1)) & np.uint64(0x5555555555555555))
    x = (x & np.uint64(0x3333333333333333)) + ((x >> np.uint64(2)) & np.uint64(0x3333333333333333))
    x = (x + (x >> np.uint64(4))) & np.uint64(0x0F0F0F0F0F0F0F0F)
    return int((x * np.uint64(0x0101010101010101)) >> np.uint64(56))


@njit(cache=True, nogil=True)
def _level_count(words, w0, nw):
    """Allowed levels of the column held in words ``w0 : w0 + nw``."""
    out = 0
    for w in range(w0, w0 + nw):
        out += _popcount(words[w])
    return out


@njit(cache=True, nogil=True)
def _level_count_and(words, other, w0, nw):
    """Allowed levels of the column held in words ``w0 : w0 + nw`` also set in ``other``."""
    out = 0
    for w in range(w0, w0 + nw):
        out += _popcount(words[w] & other[w])
    return out


@njit(cache=True, nogil=True)
def _region_q(node, lo, hi, words, geo, lw):
    """``q̂`` (eq. (8)) at ``node`` from a region with level sets as bit words (``geo``:
    :class:`~.star.GeometryArrays`, ``lw``: :class:`~.star.LevelWords`)."""
    feature, threshold, cat_off, nlev = geo.feature, geo.threshold, geo.cat_off, geo.nlev
    left_bits, word_off = lw.left_bits, lw.word_off
    j = feature[node]
    if cat_off[node] >= 0:
        nw = (nlev[j] + 63) // 64
        tot = _level_count(words, word_off[j], nw)
        a = _level_count_and(words, left_bits[node], word_off[j], nw)
        s_reg = a / tot if tot > 0 else 0.0
    else:
        s_reg = interval_share(threshold[node], lo[j], hi[j])
    return branch_q(node, s_reg, geo.left, geo.right, geo.weight, geo.share)


@njit(cache=True, nogil=True)
def _cut(node, go_left, lo, hi, words, geo, lw):
    """Intersect the region with the chosen child of ``node`` (in place)."""
    threshold, cat_off, nlev = geo.threshold, geo.cat_off, geo.nlev
    left_bits, word_off = lw.left_bits, lw.word_off
    j = geo.feature[node]
    if cat_off[node] >= 0:
        for w in range(word_off[j], word_off[j] + (nlev[j] + 63) // 64):
            words[w] &= left_bits[node, w] if go_left else ~left_bits[node, w]
    elif go_left:
        hi[j] = min(hi[j], threshold[node])
    else:
        lo[j] = max(lo[j], threshold[node])


@njit(cache=True, nogil=True)
def _log_measure_words(lo, hi, words, obs, word_off, nlev):
    """Log measure of a region on the observed columns (in column order)."""
    out = 0.0
    for j in range(lo.shape[0]):
        if not obs[j]:
            continue
        if word_off[j] >= 0:
            cnt = _level_count(words, word_off[j], (nlev[j] + 63) // 64)
            out += math.log(cnt) if cnt > 0 else -math.inf
        else:
            w = hi[j] - lo[j]
            out += math.log(w) if w > 0 else -math.inf
    return out


@njit(cache=True, nogil=True)
def _store(i, a_lo, a_hi, a_words, a_leaf, lo, hi, words, leaf):
    """Row ``i`` of the stacked regions ``a_*`` := the region ``(lo, hi, words, leaf)``."""
    for k in range(lo.shape[0]):
        a_lo[i, k] = lo[k]
        a_hi[i, k] = hi[k]
    for k in range(words.shape[0]):
        a_words[i, k] = words[k]
    for k in range(leaf.shape[0]):
        a_leaf[i, k] = leaf[k]


@njit(cache=True, nogil=True)
def _load(i, a_lo, a_hi, a_words, a_leaf, lo, hi, words, leaf):
    """The region ``(lo, hi, words, leaf)`` := row ``i`` of the stacked regions ``a_*``."""
    for k in range(lo.shape[0]):
        lo[k] = a_lo[i, k]
        hi[k] = a_hi[i, k]
    for k in range(words.shape[0]):
        words[k] = a_words[i, k]
    for k in range(leaf.shape[0]):
        leaf[k] = a_leaf[i, k]


@njit(cache=True, nogil=True)
def _regions_kernel(x, obs, budget, geo, lw):
    """Depth-first enumeration of :func:`approx_regions`, level sets as bit words
    (:meth:`~forestgen.families.intersection.star.TreeGeometry.level_words`). Returns ``(status, n,
    log_q, lo, hi, words, leaf_node, log_measure)``, the outputs' first ``n`` rows filled;
    ``status`` 1 when more than ``budget`` paths were live."""
    feature, threshold, right, cat_off, roots = geo.feature, geo.threshold, geo.right, \
        geo.cat_off, geo.roots
    left = geo.left
    nlo, nhi, nlev = geo.lo, geo.hi, geo.nlev
    node_bits, left_bits, word_off = lw.node_bits, lw.left_bits, lw.word_off
    d = nlo.shape[1]
    W = node_bits.shape[1]
    T = roots.shape[0]
    cap = 16
    s_t = np.empty(cap, np.int64)
    s_node = np.empty(cap, np.int64)
    s_lp = np.empty(cap)
    s_lo = np.empty((cap, d))
    s_hi = np.empty((cap, d))
    s_words = np.empty((cap, W), np.uint64)
    s_leaf = np.empty((cap, T), np.int64)
    o_lp = np.empty(cap)
    o_lo = np.empty((cap, d))
    o_hi = np.empty((cap, d))
    o_words = np.empty((cap, W), np.uint64)
    o_leaf = np.empty((cap, T), np.int64)
    o_mu = np.empty(cap)
    r0 = roots[0]
    lo = nlo[r0].copy()
    hi = nhi[r0].copy()
    words = node_bits[r0].copy()
    leaf = np.full(T, -1, np.int64)
    s_t[0] = 0
    s_node[0] = r0
    s_lp[0] = 0.0
    s_lo[0] = lo
    s_hi[0] = hi
    s_words[0] = words
    s_leaf[0] = leaf
    sp = 1
    n = 0
    n_live = 1
    while sp > 0:
        sp -= 1
        t = s_t[sp]
        node = s_node[sp]
        lp = s_lp[sp]
        _load(sp, s_lo, s_hi, s_words, s_leaf, lo, hi, words, leaf)
        while True:
            if feature[node] < 0:
                leaf[t] = node
                t += 1
                if t == T:
                    break
                node = roots[t]
                continue
            j = feature[node]
            q = _region_q(node, lo, hi, words, geo, lw)
            if obs[j]:
                if cat_off[node] >= 0:
                    v = int(x[j])
                    bit = left_bits[node, word_off[j] + v // 64] >> np.uint64(v % 64)
                    go_left = (bit & np.uint64(1)) == np.uint64(1)
                else:
                    go_left = x[j] <= threshold[node]
                p = q if go_left else 1.0 - q
                if p <= 0:
                    lp = -math.inf
                    break
                lp += math.log(p)
                _cut(node, go_left, lo, hi, words, geo, lw)
                node = left[node] if go_left else right[node]
                continue
            if q < 1:  # the right branch waits on the stack with a copy of the region
                n_live += 1
                if n_live > budget:
                    return 1, n, o_lp, o_lo, o_hi, o_words, o_leaf, o_mu
                if sp == s_t.shape[0]:
                    s_t, s_node, s_lp = _grow(s_t), _grow(s_node), _grow(s_lp)
                    s_lo, s_hi, s_words, s_leaf = (_grow(s_lo), _grow(s_hi), _grow(s_words),
                                                   _grow(s_leaf))
                s_t[sp] = t
                s_node[sp] = right[node]
                s_lp[sp] = lp + math.log(1.0 - q)
                _store(sp, s_lo, s_hi, s_words, s_leaf, lo, hi, words, leaf)
                _cut(node, False, s_lo[sp], s_hi[sp], s_words[sp], geo, lw)
                sp += 1
            if q <= 0:
                lp = -math.inf
                break
            lp += math.log(q)
            _cut(node, True, lo, hi, words, geo, lw)
            node = left[node]
        if lp == -math.inf:
            n_live -= 1
            continue
        if n == o_lp.shape[0]:
            o_lp, o_lo, o_hi = _grow(o_lp), _grow(o_lo), _grow(o_hi)
            o_words, o_leaf, o_mu = _grow(o_words), _grow(o_leaf), _grow(o_mu)
        o_lp[n] = lp
        _store(n, o_lo, o_hi, o_words, o_leaf, lo, hi, words, leaf)
        o_mu[n] = _log_measure_words(lo, hi, words, obs, word_off, nlev)
        n += 1
    return 0, n, o_lp, o_lo, o_hi, o_words, o_leaf, o_mu
