"""The paper's imputation walk for generative forests, with back-off (Nock & Guillame-Bert
2023, §7.2 and App. III.3.3; spec ``generative_forests.md`` §4.2, §5.3).

For a row with observed entries ``x_o``, start from one region (the whole box) holding the
training mass, and walk the trees one after the other (tree 0 to its leaves, then tree 1, ...):

* a node on an **observed** column keeps only the part of the data on ``x_o``'s side; if that
  side holds no training mass the walk of this region **stops** there and the coarser region is
  kept (the back-off: a large forest then cannot isolate the row in a cell of its own);
* a node on a **missing** column splits the region in two (both children continue); a child
  without training mass is dropped.

The training mass is the forest's cell masses ``R(C)`` (the cells refine every tree, so each
lies on one side of every node and the walk is exact on them), minus the row being imputed when
it is a training row (the transductive protocol of the paper's experiments: rows identical to
the query, missing entries included, are left out, as the reference code leaves out the imputed
row). Each final region ``B`` has a mass ``R(B)`` and a box; its score is
``R(B) / (μ_o(B_o) μ_m(B_m))`` (``score="exact"``: the region's data spread uniformly over its
box, observed and missing columns) or ``R(B) / μ_m(B_m)`` (``score="reference"``: the reference
code, volume over the missing columns only).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from numba import njit

from forestgen.tree.node_ops import in_bag


class BackoffTrees(NamedTuple):
    """The forest the walk reads: split column, threshold, children, nominal level sets
    (``cat_left[cat_off[node] + level]``) and each tree's root."""

    feature: np.ndarray
    threshold: np.ndarray
    left: np.ndarray
    right: np.ndarray
    cat_off: np.ndarray
    cat_left: np.ndarray
    roots: np.ndarray


@njit(cache=True, nogil=True)
def _cell_left(c, node, j, trees, is_nom, nom_off, nlev, cells):
    """Side of ``node`` on which cell ``c`` lies (the cells refine every tree)."""
    threshold, cat_off, cat_left = trees.threshold, trees.cat_off, trees.cat_left
    chi, cmask = cells.hi, cells.mask
    if is_nom:
        off = nom_off[j]
        for v in range(nlev[j]):
            if cmask[c, off + v]:
                return cat_left[cat_off[node] + v] == 1
        return True
    return chi[c, j] <= threshold[node]


@njit(cache=True, nogil=True)
def backoff_regions(x, trees, cells, mass, nom_off, nlev, box):
    """Final regions of the back-off walk for one encoded row ``x`` (NaN: missing) through
    :class:`BackoffTrees` ``trees`` over the forest's cells (``cells``: a
    :class:`~.cells.CellBoxes`) from the root box ``box`` (a ``CellBoxes`` of one box).

    ``mass``: training mass per cell (cells with zero mass are never visited). Returns the
    regions' masses ``[k]``, boxes ``lo, hi [k, d]`` and nominal masks ``[k, n_nom]`` and the
    cells of each region (``cells[start[r]: start[r] + count[r]]``).
    """
    feature, threshold, left, right, cat_off, cat_left, roots = trees
    box_lo, box_hi, box_mask = box
    d = x.shape[0]
    n_nom = cells.mask.shape[1]
    T = roots.shape[0]
    pool = in_bag(mass)  # the cells of positive training mass
    n = pool.shape[0]
    cap = max(n, 1)
    st_start = np.empty(cap, np.int64)
    st_count = np.empty(cap, np.int64)
    st_t = np.empty(cap, np.int64)
    st_node = np.empty(cap, np.int64)
    st_lo = np.empty((cap, d))
    st_hi = np.empty((cap, d))
    st_mask = np.empty((cap, n_nom), np.uint8)
    out_mass = np.empty(cap)
    out_lo = np.empty((cap, d))
    out_hi = np.empty((cap, d))
    out_mask = np.empty((cap, n_nom), np.uint8)
    out_start = np.empty(cap, np.int64)
    out_count = np.empty(cap, np.int64)
    n_out = 0
    if n == 0:
        return (out_mass[:0], out_lo[:0], out_hi[:0], out_mask[:0], pool, out_start[:0],
                out_count[:0])
    side = np.empty(n, np.bool_)
    buf = np.empty(n, np.int64)
    sp = 0
    st_start[0], st_count[0], st_t[0], st_node[0] = 0, n, 0, roots[0]
    st_lo[0] = box_lo
    st_hi[0] = box_hi
    st_mask[0] = box_mask
    sp = 1
    lo = np.empty(d)
    hi = np.empty(d)
    msk = np.empty(n_nom, np.uint8)
    while sp > 0:
        sp -= 1
        s, cnt, t, node = st_start[sp], st_count[sp], st_t[sp], st_node[sp]
        lo[:] = st_lo[sp]
        hi[:] = st_hi[sp]
        msk[:] = st_mask[sp]
        while True:
            j = feature[node]
            if j < 0:
                t += 1
                if t == T:
                    break
                node = roots[t]
                continue
            is_nom = cat_off[node] >= 0
            # stable partition of the region's cells: left side first
            nl = 0
            wl = 0.0
            wr = 0.0
            for k in range(s, s + cnt):
                c = pool[k]
                g = _cell_left(c, node, j, trees, is_nom, nom_off, nlev, cells)
                side[k] = g
                if g:
                    nl += 1
                    wl += mass[c]
                else:
                    wr += mass[c]
            a = s
            for k in range(s, s + cnt):
                if side[k]:
                    buf[a] = pool[k]
                    a += 1
            for k in range(s, s + cnt):
                if not side[k]:
                    buf[a] = pool[k]
                    a += 1
            pool[s: s + cnt] = buf[s: s + cnt]
            xj = x[j]
            if not np.isnan(xj):  # observed column: follow x, back off on an empty side
                if is_nom:
                    code = int(xj)
                    if code < 0 or code >= nlev[j]:
                        break
                    go_left = cat_left[cat_off[node] + code] == 1
                else:
                    go_left = xj <= threshold[node]
                if (wl if go_left else wr) <= 0.0:
                    break
                if go_left:
                    cnt = nl
                else:
                    s += nl
                    cnt -= nl
                _cut(node, j, go_left, is_nom, trees, nom_off, nlev, lo, hi, msk)
                node = left[node] if go_left else right[node]
                continue
            if wl > 0.0 and wr > 0.0:  # missing column: both sides continue
                st_start[sp], st_count[sp], st_t[sp], st_node[sp] = s + nl, cnt - nl, t, \
                    right[node]
                st_lo[sp] = lo
                st_hi[sp] = hi
                st_mask[sp] = msk
                _cut(node, j, False, is_nom, trees, nom_off, nlev, st_lo[sp], st_hi[sp],
                     st_mask[sp])
                sp += 1
                cnt = nl
                go_left = True
            elif wl > 0.0:
                cnt = nl
                go_left = True
            else:
                s += nl
                cnt -= nl
                go_left = False
            _cut(node, j, go_left, is_nom, trees, nom_off, nlev, lo, hi, msk)
            node = left[node] if go_left else right[node]
        w = 0.0
        for k in range(s, s + cnt):
            w += mass[pool[k]]
        out_mass[n_out] = w
        out_lo[n_out] = lo
        out_hi[n_out] = hi
        out_mask[n_out] = msk
        out_start[n_out] = s
        out_count[n_out] = cnt
        n_out += 1
    return (out_mass[:n_out], out_lo[:n_out], out_hi[:n_out], out_mask[:n_out], pool,
            out_start[:n_out], out_count[:n_out])


@njit(cache=True, nogil=True)
def _cut(node, j, go_left, is_nom, trees, nom_off, nlev, lo, hi, msk):
    """Intersect a region with one child of ``node`` (in place)."""
    threshold, cat_off, cat_left = trees.threshold, trees.cat_off, trees.cat_left
    if is_nom:
        off = nom_off[j]
        for v in range(nlev[j]):
            if (cat_left[cat_off[node] + v] == 1) != go_left:
                msk[off + v] = 0
    elif go_left:
        hi[j] = min(hi[j], threshold[node])
    else:
        lo[j] = max(lo[j], threshold[node])


def log_measure(lo: np.ndarray, hi: np.ndarray, mask: np.ndarray, cols: np.ndarray, kind,
                nom_off, nlev, box_lo, box_hi) -> np.ndarray:
    """Log measure of boxes ``[k, d]`` on columns ``cols``: Lebesgue on numeric columns,
    counting on ordinal codes and nominal levels; columns of zero width in the root box
    (constant columns) are left out, as the density leaves them out (spec §6.7)."""
    out = np.zeros(len(lo))
    for j in cols:
        if kind[j] == 2:
            out += np.log(mask[:, nom_off[j]: nom_off[j] + nlev[j]].sum(1))
        elif kind[j] == 1:
            out += np.log(np.floor(hi[:, j]) - np.floor(lo[:, j]))
        elif box_hi[j] > box_lo[j]:
            out += np.log(hi[:, j] - lo[:, j])
    return out


def region_pieces(R, lo, hi, mask, pool, start, count, data, own, cols, atoms: dict,
                  within: str):
    """The distribution inside the final regions, as weighted boxes (*pieces*).

    ``within="uniform"`` (the paper): one piece per region, its box, the region's data spread
    uniformly over it. ``"rows"``: the training-row fragments in the region's cells whose row
    observed every column of ``cols``, each spread uniformly over its cell, weighted by its
    share of those fragments' weight in the region; fragments of rows missing a column of
    ``cols`` only spread mass uniformly over it (spec §2.7) and carry no information on it, so
    regions without an informed fragment are left out (all regions, every fragment counting,
    when none has one). ``data = (fragment rows, leaves, weights, leaf pointers, row missing
    pattern, cell boxes (lo, hi, mask))``; ``own``: row ids left out. Returns the region of each
    piece, its weight within its region, its box and, per point-mass column ``j`` of ``atoms``
    (``{j: (values, shares [cells, atoms])}``), its shares at the atoms.
    """
    frow, fleaf, fw, ptr, row_missing, cells = data
    regions = np.arange(len(R))
    if within == "uniform" or not len(pool):
        share = {}
        for j, (_, a) in atoms.items():
            rows = []
            for r in regions:
                c = pool[start[r]: start[r] + count[r]]
                tot = R[r] if R[r] > 0 else 1.0
                rows.append(a[c].T @ _cell_mass(c, data, own) / tot if len(c)
                            else np.zeros(a.shape[1]))
            share[j] = np.array(rows)
        return regions, np.ones(len(R)), lo, hi, mask, share
    allf = [np.concatenate([np.arange(ptr[k], ptr[k + 1]) for k in
                            pool[start[r]: start[r] + count[r]]]) for r in regions]
    if len(own):
        allf = [f[~np.isin(frow[f], own)] for f in allf]
    informed = [f[~row_missing[frow[f]][:, list(cols)].any(1)] for f in allf]
    if any(len(f) for f in informed):
        allf = informed
    reg = np.concatenate([np.full(len(f), r) for r, f in zip(regions, allf)])
    frag = np.concatenate(allf)
    w = fw[frag]
    tot = np.zeros(len(R))
    np.add.at(tot, reg, w)
    leaf = fleaf[frag]
    share = {j: a[leaf] for j, (_, a) in atoms.items()}
    return reg, w / tot[reg], cells[0][leaf], cells[1][leaf], cells[2][leaf], share


def _cell_mass(c, data, own):
    """Training mass of cells ``c`` without the rows ``own``."""
    frow, fleaf, fw, ptr, _, _ = data
    out = np.empty(len(c))
    for q, k in enumerate(c):
        f = np.arange(ptr[k], ptr[k + 1])
        out[q] = fw[f].sum() - (fw[f][np.isin(frow[f], own)].sum() if len(own) else 0.0)
    return out


def piece_mean(j, w, lo, hi, mask, share, atom_values, kind, nom_off, nlev) -> float:
    """Mean (numeric; ordinal: nearest code) or most probable level (nominal) of column ``j``
    under pieces of probability ``w``, each uniform on its box except for its point-mass
    shares."""
    if kind[j] == 2:
        m = mask[:, nom_off[j]: nom_off[j] + nlev[j]].astype(float)
        return float(np.argmax(w @ (m / m.sum(1, keepdims=True))))
    if kind[j] == 1:
        c = 0.5 * (np.floor(lo[:, j]) + 1 + np.floor(hi[:, j]))
        return float(np.clip(np.round(w @ c), 0, nlev[j] - 1))
    c = 0.5 * (lo[:, j] + hi[:, j])
    if j in share:
        a = share[j]
        c = a @ atom_values[j] + (1.0 - a.sum(1)) * c
    return float(w @ c)


def piece_draw(lo, hi, mask, cols, kind, nom_off, nlev, share, atom_values, rng) -> dict:
    """Values on columns ``cols`` drawn in one piece: uniform on its box, except that a
    point-mass column first takes each atom with the piece's share at it."""
    out = {}
    for j in cols:
        if kind[j] == 2:
            lv = np.flatnonzero(mask[nom_off[j]: nom_off[j] + nlev[j]])
            out[j] = float(lv[rng.integers(len(lv))])
            continue
        if kind[j] == 1:
            out[j] = float(rng.integers(math.floor(lo[j]) + 1, math.floor(hi[j]) + 1))
            continue
        u = rng.random()
        if j in share:
            k = int(np.searchsorted(np.cumsum(share[j]), u, side="right"))
            if k < len(atom_values[j]):
                out[j] = float(atom_values[j][k])
                continue
        out[j] = float(lo[j] + (hi[j] - lo[j]) * rng.random())
    return out
