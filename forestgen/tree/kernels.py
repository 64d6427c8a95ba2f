"""Numba kernels over :class:`~forestgen.tree.arrays.ForestArrays`: routing and leaf boxes.

Routing convention (every learner): go left iff ``x[feature] <= threshold``; a nominal split
sends the levels whose byte in ``cat_left[cat_off[node] + code]`` is 1 to the left; a missing
value (NaN) or a level the split has never seen (code outside ``0..k-1``) follows ``nan_left``.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from forestgen.parallel import parallel_kernel


@njit(cache=True, nogil=True, inline="always")
def _go_left(x, node, feature, threshold, nan_left, cat_off, cat_left, n_levels):
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
                    if _go_left(X[i, feature[node]], node, feature, threshold, nan_left, cat_off,
                                cat_left, n_levels):
                        node = left[node]
                    else:
                        node = right[node]
                out[i, b] = node_leaf[node]
    return out


@njit(cache=True, nogil=True)
def _reach_row(x, b, roots, feature, threshold, nan_left, left, right, cat_off, cat_left,
               n_levels, node_leaf, stack, out, pos, write):
    sp = 0
    stack[0] = roots[b]
    sp = 1
    while sp > 0:
        sp -= 1
        node = stack[sp]
        f = feature[node]
        if f < 0:
            if write:
                out[pos] = node_leaf[node]
            pos += 1
            continue
        if np.isnan(x[f]):
            stack[sp] = left[node]
            stack[sp + 1] = right[node]
            sp += 2
        elif _go_left(x[f], node, feature, threshold, nan_left, cat_off, cat_left, n_levels):
            stack[sp] = left[node]
            sp += 1
        else:
            stack[sp] = right[node]
            sp += 1
    return pos


@njit(cache=True, nogil=True)
def reach_kernel(X, feature, threshold, nan_left, left, right, cat_off, cat_left, n_levels,
                 roots, node_leaf, max_nodes):
    """Every leaf consistent with each row when NaN entries are *marginalised* (both branches).

    Returns CSR ``(ptr[n+1], leaves[nnz])`` of global leaf ids; a complete row reaches exactly
    one leaf per tree.
    """
    n = X.shape[0]
    B = roots.shape[0]
    stack = np.empty(max_nodes + 2, np.int64)
    ptr = np.zeros(n + 1, np.int64)
    dummy = np.empty(0, np.int32)
    for i in range(n):
        cnt = 0
        for b in range(B):
            cnt = _reach_row(X[i], b, roots, feature, threshold, nan_left, left, right, cat_off,
                             cat_left, n_levels, node_leaf, stack, dummy, cnt, False)
        ptr[i + 1] = ptr[i] + cnt
    out = np.empty(ptr[n], np.int32)
    for i in range(n):
        pos = ptr[i]
        for b in range(B):
            pos = _reach_row(X[i], b, roots, feature, threshold, nan_left, left, right, cat_off,
                             cat_left, n_levels, node_leaf, stack, out, pos, True)
    return ptr, out


@njit(cache=True, nogil=True)
def boxes_kernel(feature, threshold, left, right, cat_off, cat_left, n_levels, node_leaf,
                 n_leaves, d, nom_off, n_nom):
    """Leaf boxes: ``lower, upper [L, d]`` (interval ``(lower, upper]``) and nominal masks.

    ``nom_off[j]`` is column j's offset into the mask's level axis (-1 for non-nominal).
    """
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
