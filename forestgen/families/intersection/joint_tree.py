"""The joint partition of a generative forest's cell table as one tree (Nock & Guillame-Bert
2023, eq. (3); spec ``generative_forests.md`` §1.3): :func:`partition_tree` keeps the forest's
splits that separate cells, so each leaf holds one cell; :func:`cover_box` completes it so its
leaves tile the whole root box (cells and empty regions). The
:class:`~forestgen.families.intersection.ensembler.IntersectionEnsembler` compiles GF.Boost's
cells with them.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from forestgen.families.intersection.cells import KIND_NOMINAL, CellBoxes, CellTable
from forestgen.tree.record import TreeRecord


def partition_tree(table: CellTable) -> tuple[dict, np.ndarray]:
    """One binary tree whose leaves are exactly the table's cells (the joint partition).

    Walks the trees in order (tree 0 to the end, then tree 1, ...) and keeps a node only where
    it separates cells, so the tree has ``n_cells`` leaves and ``n_cells - 1`` splits. Returns
    the tree as a :class:`~forestgen.tree.record.TreeRecord` and the cell of each leaf (in the
    order ``from_trees`` numbers leaves).
    """
    n = table.n_cells
    roots = np.arange(table.n_trees, dtype=np.int64)
    layout, nodes, cells, _ = table.bundles()
    feat, thr, left, right, cat, leaf_cell = _partition_kernel(n, roots, layout, nodes, cells)
    tree = _tree_record(feat, thr, left, right, cat, table)
    leaves = np.nonzero(feat < 0)[0]
    return tree, leaf_cell[leaves]


@njit(cache=True, nogil=True)
def _goes_left(c, node, layout, nodes, cells):
    """Whether cell ``c`` lies on the left of the split at table node ``node``."""
    kind, nom_off = layout.kind, layout.nom_off
    nthr, nsplit = nodes.nthr, nodes.nsplit
    chi, cmask = cells.chi, cells.cmask
    j = nodes.nfeat[node]
    if kind[j] == 2:
        off = nom_off[j]
        for v in range(nsplit.shape[1] - off):
            if cmask[c, off + v]:
                return nsplit[node, off + v] == 1
        return True
    return chi[c, j] <= nthr[node]


@njit(cache=True, nogil=True)
def _partition_kernel(n, roots, layout, nodes, cells):
    """:func:`partition_tree` on the table's bundles (:meth:`CellTable.bundles`)."""
    nfeat, nthr, nleft, nright, nsplit = nodes.nfeat, nodes.nthr, nodes.nleft, nodes.nright, \
        nodes.nsplit
    N = max(2 * n - 1, 1)
    feat = np.full(N, -1, np.int64)
    thr = np.zeros(N)
    left = np.full(N, -1, np.int64)
    right = np.full(N, -1, np.int64)
    cat = np.zeros((N, nsplit.shape[1]), np.uint8)
    leaf_cell = np.full(N, -1, np.int64)
    idx = np.arange(n)
    side = np.zeros(n, np.bool_)
    # stack frames: output node, segment [s, e), tree t, star node
    st_out = np.empty(N, np.int64)
    st_s = np.empty(N, np.int64)
    st_e = np.empty(N, np.int64)
    st_t = np.empty(N, np.int64)
    st_star = np.empty(N, np.int64)
    sp = 0
    st_out[0], st_s[0], st_e[0], st_t[0], st_star[0] = 0, 0, n, 0, roots[0]
    sp = 1
    n_out = 1
    while sp > 0:
        sp -= 1
        o, s, e, t, star = st_out[sp], st_s[sp], st_e[sp], st_t[sp], st_star[sp]
        while True:
            if e - s == 1:
                leaf_cell[o] = idx[s]
                break
            if nfeat[star] < 0:
                t += 1
                star = roots[t]  # e - s > 1 means some tree still separates the cells
                continue
            nl = 0
            for q in range(s, e):
                side[q] = _goes_left(idx[q], star, layout, nodes, cells)
                if side[q]:
                    nl += 1
            if nl == e - s:
                star = nleft[star]
                continue
            if nl == 0:
                star = nright[star]
                continue
            # stable partition of the segment: left cells first
            buf = idx[s:e].copy()
            sb = side[s:e].copy()
            a = s
            for q in range(e - s):
                if sb[q]:
                    idx[a] = buf[q]
                    a += 1
            for q in range(e - s):
                if not sb[q]:
                    idx[a] = buf[q]
                    a += 1
            feat[o] = nfeat[star]
            thr[o] = nthr[star]
            cat[o] = nsplit[star]
            lo_id = n_out
            ro_id = n_out + 1
            n_out += 2
            left[o] = lo_id
            right[o] = ro_id
            st_out[sp], st_s[sp], st_e[sp], st_t[sp], st_star[sp] = ro_id, s + nl, e, t, \
                nright[star]
            sp += 1
            st_out[sp], st_s[sp], st_e[sp], st_t[sp], st_star[sp] = lo_id, s, s + nl, t, \
                nleft[star]
            sp += 1
            break
    return feat[:n_out], thr[:n_out], left[:n_out], right[:n_out], cat[:n_out], \
        leaf_cell[:n_out]


def cover_box(tree: TreeRecord, leaf_cell: np.ndarray, table: CellTable
              ) -> tuple[TreeRecord, np.ndarray, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Complete the partition tree so that its leaves tile the whole root box.

    A leaf of :func:`partition_tree` holds one cell, but its region (the box its path defines)
    is larger: the parts of the forest's partition without training data were skipped. Each
    such leaf becomes a chain of splits at the cell's bounds (``x <= lower``, ``x <= upper``
    per ordered column, the cell's level set per nominal one) whose off-cell sides are *empty
    regions*, so every point of the root box reaches exactly one leaf: a cell (``cell >= 0``)
    or an empty region (``cell = -1``). Slabs of zero measure (no integer code in them) are
    not cut. Returns the tree, the cell of each leaf (in leaf order) and each leaf's box
    ``(lo, hi, mask)``.
    """
    kind, nom_off, nlev = table.kind, table.nom_off, table.nlev
    n_old = tree.n_nodes
    old_leaf_cell = np.full(n_old, -1, np.int64)
    old_leaf_cell[np.nonzero(tree.feature < 0)[0]] = leaf_cell
    n_nom = table.cmask.shape[1]
    old_cat = np.zeros((n_old, n_nom), np.uint8)
    for node in np.nonzero(tree.cat_off >= 0)[0]:
        j = tree.feature[node]
        o = nom_off[j]
        old_cat[node, o: o + nlev[j]] = tree.cat_left[tree.cat_off[node]: tree.cat_off[node]
                                                      + nlev[j]]
    args = (PartitionTree(tree.feature.astype(np.int64), tree.threshold.astype(np.float64),
                          tree.left.astype(np.int64), tree.right.astype(np.int64), old_cat,
                          old_leaf_cell),
            CoverColumns(kind, nom_off, nlev, table.integer),
            CellBoxes(table.clo, table.chi, table.cmask),
            CellBoxes(table.root_lo, table.root_hi, table.root_mask))
    n_nodes, n_leaves = _cover_kernel(*args, 0, 0, True)[:2]
    (_, _, feat, thr, left, right, cat, lo, hi, mask, cell) = _cover_kernel(
        *args, n_nodes, n_leaves, False)
    return _tree_record(feat, thr, left, right, cat, table), cell, (lo, hi, mask)


class PartitionTree(NamedTuple):
    """The partition tree :func:`cover_box` completes: nodes' split column, threshold,
    children, nominal left levels ``cat [nodes, levels]`` and each leaf's cell (-1 elsewhere)."""

    feature: np.ndarray
    threshold: np.ndarray
    left: np.ndarray
    right: np.ndarray
    cat: np.ndarray
    cell: np.ndarray


class CoverColumns(NamedTuple):
    """Per column: kind code, nominal level offset, level count, integer-coded."""

    kind: np.ndarray
    nom_off: np.ndarray
    nlev: np.ndarray
    integer: np.ndarray


@njit(cache=True, nogil=True)
def _cover_kernel(old, cols, cells, root, n_nodes, n_leaves, count_only):
    """Two passes of :func:`cover_box`: ``count_only`` returns the node and leaf counts, then
    the arrays are filled (depth-first, left before right, so leaves come in node order)."""
    ofeat, othr, oleft, oright, ocat, ocell = old
    kind, nom_off, nlev, integer = cols
    clo, chi, cmask = cells
    root_lo, root_hi, root_mask = root
    d = len(kind)
    n_nom = cmask.shape[1]
    cap = max(n_nodes, 1)
    feat = np.full(cap, -1, np.int64)
    thr = np.zeros(cap)
    left = np.full(cap, -1, np.int64)
    right = np.full(cap, -1, np.int64)
    cat = np.zeros((cap if not count_only else 1, n_nom), np.uint8)
    capl = max(n_leaves, 1) if not count_only else 1
    blo = np.zeros((capl, d))
    bhi = np.zeros((capl, d))
    bmask = np.zeros((capl, n_nom), np.uint8)
    bcell = np.full(capl, -1, np.int64)
    # the leaf id of a node is assigned when it is finished; leaves must be numbered in node
    # order, so record (node, box) and sort at the end
    leaf_node = np.full(capl, -1, np.int64)
    depth_cap = len(ofeat) + 1
    st_old = np.empty(depth_cap, np.int64)
    st_out = np.empty(depth_cap, np.int64)
    st_lo = np.empty((depth_cap, d))
    st_hi = np.empty((depth_cap, d))
    st_mask = np.empty((depth_cap, n_nom), np.uint8)
    sp = 0
    st_old[0], st_out[0] = 0, 0
    st_lo[0] = root_lo
    st_hi[0] = root_hi
    st_mask[0] = root_mask
    sp = 1
    nn = 1  # nodes used
    nl = 0  # leaves used
    lo = np.empty(d)
    hi = np.empty(d)
    mask = np.empty(n_nom, np.uint8)
    while sp > 0:
        sp -= 1
        old, o = st_old[sp], st_out[sp]
        lo[:] = st_lo[sp]
        hi[:] = st_hi[sp]
        mask[:] = st_mask[sp]
        j = ofeat[old]
        if j >= 0:
            a, b = nn, nn + 1
            nn += 2
            if not count_only:
                feat[o], thr[o], left[o], right[o] = j, othr[old], a, b
                cat[o] = ocat[old]
            # push right then left (left popped first)
            st_old[sp], st_out[sp] = oright[old], b
            st_lo[sp] = lo
            st_hi[sp] = hi
            st_mask[sp] = mask
            if kind[j] == 2:
                for v in range(nlev[j]):
                    st_mask[sp, nom_off[j] + v] &= 1 - ocat[old, nom_off[j] + v]
            else:
                st_lo[sp, j] = max(lo[j], othr[old])
            sp += 1
            st_old[sp], st_out[sp] = oleft[old], a
            st_lo[sp] = lo
            st_hi[sp] = hi
            st_mask[sp] = mask
            if kind[j] == 2:
                for v in range(nlev[j]):
                    st_mask[sp, nom_off[j] + v] &= ocat[old, nom_off[j] + v]
            else:
                st_hi[sp, j] = min(hi[j], othr[old])
            sp += 1
            continue
        c = ocell[old]
        for j in range(d):  # peel the empty slabs off the region, column by column
            if kind[j] == 2:
                off = nom_off[j]
                rest = False
                for v in range(nlev[j]):
                    if mask[off + v] and not cmask[c, off + v]:
                        rest = True
                if rest:
                    a, b = nn, nn + 1
                    nn += 2
                    if not count_only:
                        feat[o], left[o], right[o] = j, a, b
                        for v in range(nlev[j]):
                            cat[o, off + v] = cmask[c, off + v]
                        blo[nl] = lo
                        bhi[nl] = hi
                        bmask[nl] = mask
                        for v in range(nlev[j]):
                            bmask[nl, off + v] = mask[off + v] & (1 - cmask[c, off + v])
                        leaf_node[nl] = b
                    nl += 1
                    for v in range(nlev[j]):
                        mask[off + v] &= cmask[c, off + v]
                    o = a
                continue
            meas = (np.floor(clo[c, j]) - np.floor(lo[j])) if integer[j] else clo[c, j] - lo[j]
            if meas > 0:
                a, b = nn, nn + 1
                nn += 2
                if not count_only:
                    feat[o], thr[o], left[o], right[o] = j, clo[c, j], a, b
                    blo[nl] = lo
                    bhi[nl] = hi
                    bhi[nl, j] = clo[c, j]
                    bmask[nl] = mask
                    leaf_node[nl] = a
                nl += 1
                lo[j] = clo[c, j]
                o = b
            meas = (np.floor(hi[j]) - np.floor(chi[c, j])) if integer[j] else hi[j] - chi[c, j]
            if meas > 0:
                a, b = nn, nn + 1
                nn += 2
                if not count_only:
                    feat[o], thr[o], left[o], right[o] = j, chi[c, j], a, b
                    blo[nl] = lo
                    blo[nl, j] = chi[c, j]
                    bhi[nl] = hi
                    bmask[nl] = mask
                    leaf_node[nl] = b
                nl += 1
                hi[j] = chi[c, j]
                o = a
        if not count_only:
            blo[nl] = clo[c]
            bhi[nl] = chi[c]
            bmask[nl] = cmask[c]
            bcell[nl] = c
            leaf_node[nl] = o
        nl += 1
    if count_only:
        return nn, nl, feat, thr, left, right, cat, blo, bhi, bmask, bcell
    order = np.argsort(leaf_node)
    return nn, nl, feat, thr, left, right, cat, blo[order], bhi[order], bmask[order], \
        bcell[order]


def _tree_record(feat, thr, left, right, cat, table: CellTable) -> TreeRecord:
    """A :class:`~forestgen.tree.record.TreeRecord` from a kernel's node arrays, the level
    masks ``cat [nodes, nominal slots]`` of its nominal splits packed into ``cat_left``."""
    kind, nom_off, nlev = table.kind, table.nom_off, table.nlev
    cat_off = np.full(len(feat), -1, np.int64)
    parts = []
    acc = 0
    for node in np.nonzero(feat >= 0)[0]:
        j = feat[node]
        if kind[j] == KIND_NOMINAL:
            cat_off[node] = acc
            parts.append(cat[node, nom_off[j]: nom_off[j] + nlev[j]])
            acc += int(nlev[j])
    return TreeRecord(feature=np.asarray(feat, np.int32), threshold=np.asarray(thr, np.float64),
                      nan_left=np.ones(len(feat), np.uint8), left=np.asarray(left, np.int32),
                      right=np.asarray(right, np.int32), cat_off=cat_off,
                      cat_left=np.concatenate(parts).astype(np.uint8) if parts
                      else np.zeros(0, np.uint8))
