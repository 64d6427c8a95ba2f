"""Numba kernels over :class:`~forestgen.tree.arrays.ForestArrays`: routing and leaf boxes.

Routing convention (every learner): go left iff ``x[feature] <= threshold``; a nominal split
sends the levels whose byte in ``cat_left[cat_off[node] + code]`` is 1 to the left; a missing
value (NaN) or a level the split has never seen (code outside ``0..k-1``) follows ``nan_left``.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit, prange

from forestgen.parallel import parallel_kernel


class ForestView(NamedTuple):
    """The forest's node arrays a walk reads (:class:`~forestgen.tree.arrays.ForestArrays`):
    split column, threshold, missing side, children, nominal level sets, the columns' level
    counts, each tree's root and each leaf node's global leaf id."""

    feature: np.ndarray
    threshold: np.ndarray
    nan_left: np.ndarray
    left: np.ndarray
    right: np.ndarray
    cat_off: np.ndarray
    cat_left: np.ndarray
    n_levels: np.ndarray
    roots: np.ndarray
    node_leaf: np.ndarray


class EvidenceRows(NamedTuple):
    """Rows of evidence: point values ``X [n, d]`` (NaN: none); intervals ``(lo, hi]``
    (``lo``/``hi [n, d]``, NaN ``lo``: none; ``[0, d]`` arrays: none at all); level sets:
    ``sact [n, d]`` marks column ``j``'s set in ``smask[:, soff[j] : soff[j] + sk[j]]``
    (``sact`` ``[0, d]``: none)."""

    X: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    sact: np.ndarray
    smask: np.ndarray
    soff: np.ndarray
    sk: np.ndarray


@njit(cache=True, nogil=True, inline="always")
def go_left(x, node, feature, threshold, nan_left, cat_off, cat_left, n_levels):
    if np.isnan(x):
        return nan_left[node] == 1
    off = cat_off[node]
    if off >= 0:
        k = n_levels[feature[node]]
        code = int(x)
        if code < 0 or code >= k or code != x:
            return nan_left[node] == 1
        return cat_left[off + code] == 1
    return x <= threshold[node]


APPLY_BLOCK = 512


@parallel_kernel
def apply_kernel(X, feature, threshold, nan_left, left, right, cat_off, cat_left, n_levels,
                 roots, node_leaf):
    """Global leaf id per (row, tree): ``[n, n_trees]`` int32.

    Parallel over blocks of rows; inside a block the loop is tree-major, so one tree's nodes stay
    in cache while the block's rows walk it (row-major order thrashes the cache on deep forests).
    """
    n = X.shape[0]
    B = roots.shape[0]
    out = np.empty((n, B), np.int32)
    n_blocks = (n + APPLY_BLOCK - 1) // APPLY_BLOCK
    for blk in prange(n_blocks):
        lo = blk * APPLY_BLOCK
        hi = min(n, lo + APPLY_BLOCK)
        for b in range(B):
            for i in range(lo, hi):
                node = roots[b]
                while feature[node] >= 0:
                    if go_left(X[i, feature[node]], node, feature, threshold, nan_left, cat_off,
                                cat_left, n_levels):
                        node = left[node]
                    else:
                        node = right[node]
                out[i, b] = node_leaf[node]
    return out


@njit(cache=True, nogil=True)
def _set_sides(i, node, f, smask, o, k, threshold, nan_left, cat_off, cat_left, n_levels):
    """Children of ``node`` (``1`` left, ``2`` right, ``3`` both) that hold a level of row
    ``i``'s level set ``smask[i, o : o + k]`` on column ``f``."""
    off = cat_off[node]
    kf = n_levels[f]
    s = 0
    for c in range(k):
        if not smask[i, o + c]:
            continue
        if off >= 0:
            if c >= kf:  # a level the split never saw follows nan_left
                s |= 1 if nan_left[node] == 1 else 2
            else:
                s |= 1 if cat_left[off + c] == 1 else 2
        else:
            s |= 1 if c <= threshold[node] else 2
        if s == 3:
            break
    return s


@njit(cache=True, nogil=True, inline="always")
def evidence_sides(i, node, ev, fv):
    """Children of internal ``node`` (``1`` left, ``2`` right, ``3`` both, ``0`` none) that
    row ``i`` of :class:`EvidenceRows` ``ev`` reaches in :class:`ForestView` ``fv``: a point
    value routes (:func:`go_left`); without one, an interval or a level set goes to each child
    it intersects, and no evidence (NaN) goes to both."""
    feature, threshold = fv.feature, fv.threshold
    f = feature[node]
    x = ev.X[i, f]
    if not np.isnan(x):
        return 1 if go_left(x, node, feature, threshold, fv.nan_left, fv.cat_off, fv.cat_left,
                            fv.n_levels) else 2
    if ev.lo.shape[0] > 0 and not np.isnan(ev.lo[i, f]):
        t = threshold[node]
        return (1 if ev.lo[i, f] < t else 0) | (2 if ev.hi[i, f] > t else 0)
    if ev.sact.shape[0] > 0 and ev.sact[i, f]:
        return _set_sides(i, node, f, ev.smask, ev.soff[f], ev.sk[f], threshold, fv.nan_left,
                          fv.cat_off, fv.cat_left, fv.n_levels)
    return 3


@njit(cache=True, nogil=True)
def _walk_row(i, b, ev, fv, stack, out, pos, write):
    """Depth-first walk of tree ``b`` for row ``i`` of ``ev`` (:class:`EvidenceRows`) in
    ``fv`` (:class:`ForestView`); counts (and with ``write`` stores from ``pos``) the leaves
    reached, right subtrees first. Returns the next position.

    At a split on column ``f``: a point value ``X[i, f]`` routes; without one, an interval
    ``(lo, hi]`` or a level set goes to each child it intersects, and no evidence (NaN) goes
    to both."""
    X, lo, hi, sact, smask, soff, sk = ev
    feature, threshold, nan_left, left, right, cat_off, cat_left, n_levels, roots, \
        node_leaf = fv
    has_iv = lo.shape[0] > 0
    has_set = sact.shape[0] > 0
    stack[0] = roots[b]
    sp = 1
    while sp > 0:
        sp -= 1
        node = stack[sp]
        f = feature[node]
        if f < 0:
            if write and pos < out.shape[0]:
                out[pos] = node_leaf[node]
            pos += 1
            continue
        x = X[i, f]  # (evidence_sides' rule, written out: a call here slows the walk)
        if not np.isnan(x):
            s = 1 if go_left(x, node, feature, threshold, nan_left, cat_off, cat_left,
                              n_levels) else 2
        elif has_iv and not np.isnan(lo[i, f]):
            t = threshold[node]
            s = (1 if lo[i, f] < t else 0) | (2 if hi[i, f] > t else 0)
        elif has_set and sact[i, f]:
            s = _set_sides(i, node, f, smask, soff[f], sk[f], threshold, nan_left, cat_off,
                           cat_left, n_levels)
        else:
            s = 3
        if s & 1:
            stack[sp] = left[node]
            sp += 1
        if s & 2:
            stack[sp] = right[node]
            sp += 1
    return pos


@parallel_kernel
def walk_kernel(ev, fv, max_nodes, block):
    """Every leaf each row can reach given its evidence: CSR ``(ptr[n+1], leaves[nnz])`` of
    global leaf ids, per row tree by tree (within a tree, right subtrees first).

    ``ev``: :class:`EvidenceRows` (point values, NaN = marginalised; intervals; level sets);
    ``fv``: :class:`ForestView`. A subtree is skipped only when the evidence excludes its
    whole cell, so every leaf with non-zero evidence mass is listed. Two parallel passes over
    row blocks (count, then fill at prefix-sum offsets) give the same output at any thread
    count and ``block`` size.
    """
    n = ev.X.shape[0]
    B = fv.roots.shape[0]
    ptr = np.zeros(n + 1, np.int64)
    n_blocks = (n + block - 1) // block
    dummy = np.empty(0, np.int32)
    for blk in prange(n_blocks):
        stack = np.empty(max_nodes + 2, np.int64)
        r0 = blk * block
        r1 = min(n, r0 + block)
        for b in range(B):  # tree-major inside a block: one tree's nodes stay in cache
            for i in range(r0, r1):
                ptr[i + 1] = _walk_row(i, b, ev, fv, stack, dummy, ptr[i + 1], False)
    for i in range(n):
        ptr[i + 1] += ptr[i]
    out = np.empty(ptr[n], np.int32)
    for blk in prange(n_blocks):
        stack = np.empty(max_nodes + 2, np.int64)
        r0 = blk * block
        r1 = min(n, r0 + block)
        pos = ptr[r0:r1].copy()
        for b in range(B):
            for i in range(r0, r1):
                pos[i - r0] = _walk_row(i, b, ev, fv, stack, out, pos[i - r0], True)
    return ptr, out


@parallel_kernel
def walk_once_kernel(ev, fv, max_nodes, block, cap):
    """:func:`walk_kernel`'s output in one walk instead of two, given ``cap``, a bound on the
    mean number of leaves per row within each block: every block walks tree-major into a
    buffer of ``cap`` pairs per row, reorders it row by row (stable, so each row keeps the
    tree and depth-first order), and the blocks are then copied to their CSR offsets. A block
    that overflows its buffer still counts its rows' leaves exactly; only such blocks are
    walked a second time, writing straight to their CSR offsets. Returns ``(ptr, leaves)``.
    """
    n = ev.X.shape[0]
    B = fv.roots.shape[0]
    n_blocks = (n + block - 1) // block
    counts = np.zeros(n, np.int64)
    buf = np.empty(n * cap, np.int32)
    fail = np.zeros(n_blocks, np.bool_)
    for blk in prange(n_blocks):
        stack = np.empty(max_nodes + 2, np.int64)
        r0 = blk * block
        r1 = min(n, r0 + block)
        bcap = (r1 - r0) * cap
        lleaf = np.empty(bcap, np.int32)
        lrow = np.empty(bcap, np.int32)
        nb = 0
        for b in range(B):
            for i in range(r0, r1):
                end = _walk_row(i, b, ev, fv, stack, lleaf, nb, True)
                for q in range(nb, min(end, bcap)):
                    lrow[q] = i - r0
                counts[i] += end - nb
                nb = end
        if nb > bcap:
            fail[blk] = True
            continue
        cur = np.empty(r1 - r0, np.int64)
        acc = r0 * cap
        for i in range(r0, r1):
            cur[i - r0] = acc
            acc += counts[i]
        for q in range(nb):
            buf[cur[lrow[q]]] = lleaf[q]
            cur[lrow[q]] += 1
    ptr = np.zeros(n + 1, np.int64)
    for i in range(n):
        ptr[i + 1] = ptr[i] + counts[i]
    out = np.empty(ptr[n], np.int32)
    for blk in prange(n_blocks):
        r0 = blk * block
        r1 = min(n, r0 + block)
        if not fail[blk]:
            m = ptr[r1] - ptr[r0]
            out[ptr[r0]: ptr[r0] + m] = buf[r0 * cap: r0 * cap + m]
            continue
        stack = np.empty(max_nodes + 2, np.int64)
        pos = ptr[r0:r1].copy()
        for b in range(B):
            for i in range(r0, r1):
                pos[i - r0] = _walk_row(i, b, ev, fv, stack, out, pos[i - r0], True)
    return ptr, out


@njit(cache=True, nogil=True)
def boxes_kernel(view, n_leaves, d, nom_off, n_nom):
    """Leaf boxes of a :class:`ForestView`: ``lower, upper [L, d]`` (interval
    ``(lower, upper]``) and nominal masks.

    ``nom_off[j]`` is column j's offset into the mask's level axis (-1 for non-nominal).
    """
    feature, threshold, left, right = view.feature, view.threshold, view.left, view.right
    cat_off, cat_left, n_levels, node_leaf = view.cat_off, view.cat_left, view.n_levels, \
        view.node_leaf
    N = feature.shape[0]
    parent = np.full(N, -1, np.int64)
    for node in range(N):
        if feature[node] >= 0:
            parent[left[node]] = node
            parent[right[node]] = node
    lower = np.full((n_leaves, d), -np.inf)
    upper = np.full((n_leaves, d), np.inf)
    mask = np.ones((n_leaves, n_nom), np.bool_)
    for node in range(N):
        leaf = node_leaf[node]
        if leaf < 0:
            continue
        child = node
        p = parent[child]
        while p >= 0:
            f = feature[p]
            is_left = left[p] == child
            off = cat_off[p]
            if off >= 0:
                base = nom_off[f]
                for q in range(n_levels[f]):
                    inset = cat_left[off + q] == 1
                    if inset != is_left:
                        mask[leaf, base + q] = False
            elif is_left:
                if threshold[p] < upper[leaf, f]:
                    upper[leaf, f] = threshold[p]
            else:
                if threshold[p] > lower[leaf, f]:
                    lower[leaf, f] = threshold[p]
            child = p
            p = parent[child]
    return lower, upper, mask


@njit(cache=True, nogil=True)
def column_box_kernel(view, n_leaves, j, k_nom):
    """:func:`boxes_kernel` for column ``j`` alone: ``lower, upper [L]`` and, when
    ``k_nom > 0`` (a nominal column with that many levels), the level mask ``[L, k_nom]``.

    The cost is the number of nodes, not leaves times depth; bounds are a min / max and masks
    an AND over the leaf's ancestors, so the result is the same as :func:`boxes_kernel`'s.
    When every child's id is above its parent's (the growers number nodes so) one forward
    pass over the nodes hands each node's bounds to its children; otherwise one walk down
    each tree (:func:`_column_box_walk`)."""
    feature, left, right = view.feature, view.left, view.right
    N = feature.shape[0]
    backward = False  # (no branch per node)
    for node in range(N):
        backward |= (feature[node] >= 0) & ((left[node] <= node) | (right[node] <= node))
    if backward:
        return _column_box_walk(view, n_leaves, j, k_nom)
    threshold, cat_off, cat_left, n_levels, node_leaf = (view.threshold, view.cat_off,
                                                         view.cat_left, view.n_levels,
                                                         view.node_leaf)
    lower = np.full(n_leaves, -np.inf)
    upper = np.full(n_leaves, np.inf)
    lo_n = np.full(N, -np.inf)  # each node's bounds (a root keeps the whole line)
    hi_n = np.full(N, np.inf)
    if k_nom == 0:  # bounds only (written apart: no level loops in the pass)
        for node in range(N):
            lo = lo_n[node]
            hi = hi_n[node]
            f = feature[node]
            if f < 0:
                leaf = node_leaf[node]
                if leaf >= 0:
                    lower[leaf] = lo
                    upper[leaf] = hi
                continue
            a = left[node]
            b = right[node]
            lhi = hi
            rlo = lo
            if f == j and cat_off[node] < 0:
                t = threshold[node]
                if t < lhi:
                    lhi = t
                if t > rlo:
                    rlo = t
            lo_n[a] = lo
            hi_n[a] = lhi
            lo_n[b] = rlo
            hi_n[b] = hi
        return lower, upper, np.ones((0, 0), np.bool_)
    mask = np.ones((n_leaves, k_nom), np.bool_)
    kq = min(n_levels[j], k_nom)
    mask_n = np.ones((N, k_nom), np.bool_)
    for node in range(N):
        f = feature[node]
        if f < 0:
            leaf = node_leaf[node]
            if leaf >= 0:
                lower[leaf] = lo_n[node]
                upper[leaf] = hi_n[node]
                for q in range(k_nom):
                    mask[leaf, q] = mask_n[node, q]
            continue
        a = left[node]
        b = right[node]
        lo = lo_n[node]
        hi = hi_n[node]
        lhi = hi
        rlo = lo
        if f == j and cat_off[node] < 0:
            t = threshold[node]
            if t < lhi:
                lhi = t
            if t > rlo:
                rlo = t
        lo_n[a] = lo
        hi_n[a] = lhi
        lo_n[b] = rlo
        hi_n[b] = hi
        for q in range(k_nom):
            mask_n[a, q] = mask_n[node, q]
            mask_n[b, q] = mask_n[node, q]
        if f == j and cat_off[node] >= 0:
            off = cat_off[node]
            for q in range(kq):
                if cat_left[off + q] == 1:
                    mask_n[b, q] = False  # level goes left: not in the right child
                else:
                    mask_n[a, q] = False
    return lower, upper, mask


@njit(cache=True, nogil=True)
def _column_box_walk(view, n_leaves, j, k_nom):
    """:func:`column_box_kernel` for nodes in any order: one pass down each tree (its bounds
    and mask carried on the stack)."""
    feature, threshold, left, right = view.feature, view.threshold, view.left, view.right
    cat_off, cat_left, n_levels, node_leaf = view.cat_off, view.cat_left, view.n_levels, \
        view.node_leaf
    N = feature.shape[0]
    is_child = np.zeros(N, np.bool_)
    for node in range(N):
        if feature[node] >= 0:
            is_child[left[node]] = True
            is_child[right[node]] = True
    lower = np.full(n_leaves, -np.inf)
    upper = np.full(n_leaves, np.inf)
    mask = np.ones((n_leaves if k_nom > 0 else 0, k_nom), np.bool_)
    kq = min(n_levels[j], k_nom) if k_nom > 0 else 0
    st_node = np.empty(N + 1, np.int64)
    st_lo = np.empty(N + 1)
    st_hi = np.empty(N + 1)
    st_mask = np.ones((N + 1 if k_nom > 0 else 0, k_nom), np.bool_)
    tmp = np.ones(k_nom, np.bool_)
    for root in range(N):
        if is_child[root]:
            continue
        st_node[0] = root
        st_lo[0] = -np.inf
        st_hi[0] = np.inf
        for q in range(k_nom):
            st_mask[0, q] = True
        sp = 1
        while sp > 0:
            sp -= 1
            node = st_node[sp]
            lo = st_lo[sp]
            hi = st_hi[sp]
            leaf = node_leaf[node]
            if feature[node] < 0:
                if leaf >= 0:
                    lower[leaf] = lo
                    upper[leaf] = hi
                    for q in range(k_nom):
                        mask[leaf, q] = st_mask[sp, q]
                continue
            for q in range(k_nom):
                tmp[q] = st_mask[sp, q]
            llo, lhi, rlo, rhi = lo, hi, lo, hi
            nominal_j = feature[node] == j and cat_off[node] >= 0
            if feature[node] == j and not nominal_j:
                t = threshold[node]
                if t < lhi:
                    lhi = t
                if t > rlo:
                    rlo = t
            # right child at sp, left child at sp + 1 (popped first, as a walk would)
            st_node[sp] = right[node]
            st_lo[sp] = rlo
            st_hi[sp] = rhi
            st_node[sp + 1] = left[node]
            st_lo[sp + 1] = llo
            st_hi[sp + 1] = lhi
            for q in range(k_nom):
                st_mask[sp, q] = tmp[q]
                st_mask[sp + 1, q] = tmp[q]
            if nominal_j:
                off = cat_off[node]
                for q in range(kq):
                    if cat_left[off + q] == 1:
                        st_mask[sp, q] = False  # level goes left: not in the right child
                    else:
                        st_mask[sp + 1, q] = False
            sp += 2
    return lower, upper, mask
