"""Best-first density estimation trees (Ram & Gray 2011; DEF of Bravo, ICLR 2025, App. B, D.3.4).

A tree contrasts the data mass ``P`` of a cell with its reference mass ``V`` (a product measure,
normalised to 1 on the root box). A split is scored by a criterion of ``[P, V]`` of the two
children (:mod:`forestgen.tree.criteria`: ISE ``P^2/V``, KL ``P log(P/V)``, NRGBoost's energy
gain, or a user ``@njit`` gain through :func:`grow_density_tree_with`).

The open leaf with the largest gain is split next (best-first) until ``max_leaves`` leaves or no
split gains more than ``1e-12``. Candidate columns are drawn per node
(``mtry = max(1, round(frac·d))``, without replacement, from the tree's Generator). Ordered
columns scan bin prefixes; nominal columns sort their allowed levels by ``log(P_k / V_k)`` and
scan prefixes (spec §4.3). Both children must keep ``min_samples_leaf`` (bootstrap-weighted) rows.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from forestgen.tree.criteria import criterion_gain, density_gain, specialise
from forestgen.tree.node_ops import (
    binned_sides,
    draw_candidates,
    in_bag,
    new_frontier,
    new_tree,
    partition,
    pop_best,
)

MIN_GAIN = 1e-12


class BinnedRows(NamedTuple):
    """Bin codes ``Xb [d, n]``, row weights ``w``, the in-bag rows ``idx`` (partitioned node
    by node) and their total weight ``W``."""

    Xb: np.ndarray
    w: np.ndarray
    idx: np.ndarray
    W: float


class DensityColumns(NamedTuple):
    """Per column: bins, nominal or not, offset into the nominal level masks, and the
    reference mass of each bin ``vref [d, max bins]``."""

    n_bins: np.ndarray
    nominal: np.ndarray
    nom_off: np.ndarray
    vref: np.ndarray


class DensityRule(NamedTuple):
    """Built-in criterion code, candidate columns per node, least weighted rows per child."""

    crit: int
    mtry: int
    min_leaf: float


class DensityNode(NamedTuple):
    """A node: its rows ``idx[start:end]``, reference mass ``V`` and box (bin ranges
    ``blo..bhi`` of ordered columns, allowed levels ``mask`` of nominal ones)."""

    start: int
    end: int
    V: float
    blo: np.ndarray
    bhi: np.ndarray
    mask: np.ndarray


class DensityScratch(NamedTuple):
    """Per-tree buffers of the split search."""

    feats: np.ndarray
    hist: np.ndarray
    order: np.ndarray
    keys: np.ndarray
    lbuf: np.ndarray
    rbuf: np.ndarray


@njit(cache=True, nogil=True)
def _split_gain(cP, cV, Ptot, vtot, V, W, min_leaf, crit, lbuf, rbuf):
    """Gain of sending data mass ``cP`` (of ``Ptot``) and reference mass ``cV`` (of ``vtot``)
    left in a node of reference mass ``V``; ``-inf`` if a child keeps fewer than ``min_leaf``."""
    PR = Ptot - cP
    if cP < min_leaf or PR < min_leaf or not (0.0 < cV < vtot):
        return -np.inf  # (a child of zero reference mass, e.g. duplicated values: no cut)
    return density_gain(crit, cP / W, V * cV / vtot, PR / W, V * (vtot - cV) / vtot)


@njit(cache=True, nogil=True)
def _user_split_gain(cP, cV, Ptot, vtot, V, W, min_leaf, crit, lbuf, rbuf):
    """:func:`_split_gain` for a user gain, which reads ``[P, V]`` of each child from the
    buffers ``lbuf``, ``rbuf`` (bound in its place by :func:`grow_density_tree_with`)."""
    PR = Ptot - cP
    if cP < min_leaf or PR < min_leaf or not (0.0 < cV < vtot):
        return -np.inf
    lbuf[0], lbuf[1] = cP / W, V * cV / vtot
    rbuf[0], rbuf[1] = PR / W, V * (vtot - cV) / vtot
    return criterion_gain(crit, lbuf, rbuf)


@njit(cache=True, nogil=True)
def _best_split(rows, node, cols, rule, rng, scratch, out_set):
    """Best split of one node. Returns (gain, feature, threshold bin); nominal left levels are
    written to ``out_set`` (1 = left)."""
    Xb, w, W, idx = rows.Xb, rows.w, rows.W, rows.idx
    start, end, V, blo, bhi, mask = node
    n_bins, nominal, nom_off, vref = cols
    crit, mtry, min_leaf = rule
    feats, hist, order, keys, lbuf, rbuf = scratch
    best_g = -np.inf
    best_f = -1
    best_t = -1
    Ptot = 0.0
    for r in range(start, end):
        Ptot += w[idx[r]]
    draw_candidates(feats, mtry, rng)
    for s in range(mtry):
        f = feats[s]
        nb = n_bins[f]
        for b in range(nb):
            hist[b] = 0.0
        for r in range(start, end):
            i = idx[r]
            hist[Xb[f, i]] += w[i]
        if nominal[f]:
            o = nom_off[f]
            m = 0
            vtot = 0.0
            for b in range(nb):
                if mask[o + b]:
                    order[m] = b
                    vtot += vref[f, b]
                    keys[m] = np.log(hist[b] / vref[f, b]) if hist[b] > 0 else -np.inf
                    m += 1
            if m < 2:
                continue
            srt = np.argsort(keys[:m])
            cP = 0.0
            cV = 0.0
            for q in range(m - 1):
                b = order[srt[q]]
                cP += hist[b]
                cV += vref[f, b]
                g = _split_gain(cP, cV, Ptot, vtot, V, W, min_leaf, crit, lbuf, rbuf)
                if g > best_g:
                    best_g, best_f, best_t = g, f, q
                    for k in range(nb):
                        out_set[k] = 0
                    for q2 in range(q + 1):
                        out_set[order[srt[q2]]] = 1
        else:
            a = blo[f]
            bb = bhi[f]
            if bb <= a:
                continue
            vtot = 0.0
            for b in range(a, bb + 1):
                vtot += vref[f, b]
            cP = 0.0
            cV = 0.0
            for b in range(a, bb):
                cP += hist[b]
                cV += vref[f, b]
                g = _split_gain(cP, cV, Ptot, vtot, V, W, min_leaf, crit, lbuf, rbuf)
                if g > best_g:
                    best_g, best_f, best_t = g, f, b
    return best_g, best_f, best_t


@njit(cache=True, nogil=True)
def grow_density_tree(Xb, w, cols, n_nom, root_mask, rule, max_leaves, rng):
    """Grow one DET on binned codes ``Xb [d, n]`` with row weights ``w`` (bootstrap counts),
    columns ``cols`` (:class:`DensityColumns`) and :class:`DensityRule` ``rule``; the root's
    nominal levels are ``root_mask`` (uint8 ``[n_nom]``).

    Returns tree-local ``feature, thr_bin, left, right, cat_rows [n_nodes, max_bins]`` (left level
    sets of nominal splits) and per node ``mass`` (``P``, the weighted fraction of rows) and
    ``vol`` (``V``, normalised reference mass).
    """
    n_bins, nominal, nom_off, vref = cols
    d, n = Xb.shape
    bmax = 1
    for j in range(d):
        bmax = max(bmax, n_bins[j])
    max_nodes = 2 * max_leaves - 1
    feature, left, right, cat_rows = new_tree(max_nodes, bmax)
    g_best, f_best, t_best, set_best, is_open = new_frontier(max_nodes, bmax)
    thr_bin = np.full(max_nodes, -1, np.int64)
    mass = np.zeros(max_nodes)
    vol = np.zeros(max_nodes)
    # per node state
    n_start = np.zeros(max_nodes, np.int64)
    n_end = np.zeros(max_nodes, np.int64)
    n_blo = np.zeros((max_nodes, d), np.int64)
    n_bhi = np.zeros((max_nodes, d), np.int64)
    n_mask = np.ones((max_nodes, n_nom), np.uint8)
    n_mask[0, :] = root_mask

    idx = in_bag(w)
    m = len(idx)
    W = 0.0
    for r in range(m):
        W += w[idx[r]]
    go = np.zeros(bmax + 1, np.bool_)
    scratch = DensityScratch(np.arange(d), np.zeros(bmax), np.empty(bmax, np.int64),
                             np.empty(bmax), np.zeros(2), np.zeros(2))
    rows = BinnedRows(Xb, w, idx, W)
    for j in range(d):
        n_blo[0, j] = 0
        n_bhi[0, j] = n_bins[j] - 1
    n_start[0] = 0
    n_end[0] = m
    mass[0] = 1.0
    vol[0] = 1.0
    n_nodes = 1
    g, f, t = _best_split(rows, DensityNode(0, m, 1.0, n_blo[0], n_bhi[0], n_mask[0]), cols,
                          rule, rng, scratch, set_best[0])
    g_best[0], f_best[0], t_best[0] = g, f, t
    is_open[0] = True
    n_leaves = 1
    while n_leaves < max_leaves:
        node = pop_best(is_open, g_best, n_nodes, MIN_GAIN)
        if node < 0:
            break
        f = f_best[node]
        tb = t_best[node]
        feature[node] = f
        thr_bin[node] = tb
        for k in range(bmax):
            cat_rows[node, k] = set_best[node, k]
        start = n_start[node]
        end = n_end[node]
        binned_sides(go, n_bins[f], nominal[f], set_best[node], 0, tb, True)
        mid = partition(idx, start, end, Xb[f], go)
        # reference mass fraction of the left part within the node's range of column f
        vtot = 0.0
        vl = 0.0
        if nominal[f]:
            o = nom_off[f]
            for b in range(n_bins[f]):
                if n_mask[node, o + b]:
                    vtot += vref[f, b]
                    if set_best[node, b] == 1:
                        vl += vref[f, b]
        else:
            for b in range(n_blo[node, f], n_bhi[node, f] + 1):
                vtot += vref[f, b]
                if b <= tb:
                    vl += vref[f, b]
        for side in range(2):
            c = n_nodes
            n_nodes += 1
            if side == 0:
                left[node] = c
                n_start[c] = start
                n_end[c] = mid
                vol[c] = vol[node] * vl / vtot
            else:
                right[node] = c
                n_start[c] = mid
                n_end[c] = end
                vol[c] = vol[node] * (vtot - vl) / vtot
            n_blo[c, :] = n_blo[node]
            n_bhi[c, :] = n_bhi[node]
            n_mask[c, :] = n_mask[node]
            if nominal[f]:
                o = nom_off[f]
                for b in range(n_bins[f]):
                    if (set_best[node, b] == 1) != (side == 0):
                        n_mask[c, o + b] = 0
            elif side == 0:
                n_bhi[c, f] = tb
            else:
                n_blo[c, f] = tb + 1
            s = 0.0
            for r in range(n_start[c], n_end[c]):
                s += w[idx[r]]
            mass[c] = s / W
            span = DensityNode(n_start[c], n_end[c], vol[c], n_blo[c], n_bhi[c], n_mask[c])
            g, f2, t2 = _best_split(rows, span, cols, rule, rng, scratch, set_best[c])
            g_best[c], f_best[c], t_best[c] = g, f2, t2
            is_open[c] = True
        n_leaves += 1
    return (feature[:n_nodes], thr_bin[:n_nodes], left[:n_nodes], right[:n_nodes],
            cat_rows[:n_nodes], mass[:n_nodes], vol[:n_nodes])


def grow_density_tree_with(gain):
    """:func:`grow_density_tree` compiled for the user ``@njit`` ``gain`` (once per process)."""
    return specialise(grow_density_tree, ((_user_split_gain, "_split_gain"), _best_split),
                      gain)
