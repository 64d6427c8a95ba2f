"""Random midpoint partitions of RFDE (Wen & Hang, ICML 2022, Algorithm 1).

Every cell of a depth-``p`` tree is halved at the midpoint of a coordinate drawn uniformly at
random, independently per cell; no data is looked at. The draw of a cell is a pure function
``splitmix64(seed, heap_index)`` (spec §2.1 step 2), so the partition is identical whatever data
is fed and any point's depth-``p`` cell can be computed on its own (:func:`route_codes`).

Mixed columns (spec of the NRGBoost paper's RFDE baseline, D.3.3): only columns that still have
more than one value in the cell are candidates; an ordered discrete column is halved by level
count (odd count: a hashed coin flip between the two middles); a nominal column by a hashed
random even halving of its allowed levels. Numeric columns are always splittable.

Growth (:func:`grow_midpoint_tree`) is depth-first and follows only cells containing data. A
split one of whose halves is empty creates no node: the cell is narrowed to the non-empty half
and descent continues (path compression). Each stored leaf therefore corresponds to exactly one
non-empty depth-``p`` cell, kept as the leaf's *box*; the tree holds at most ``2 n - 1`` nodes and
``2^p`` cells are never allocated. Points of the tree's region outside a leaf box lie in empty
cells and get density 0 from the box-exact leaf models.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

KIND_NUMERIC = 0
KIND_ORDERED = 1
KIND_NOMINAL = 2


class Columns(NamedTuple):
    """Per column: ``kind`` (``KIND_*``), number of levels ``nlev`` and offset ``nom_off`` of
    its levels in a nominal mask."""

    kind: np.ndarray
    nlev: np.ndarray
    nom_off: np.ndarray


class Cell(NamedTuple):
    """A cell: bounds ``lo < x <= hi`` per column and the allowed nominal levels ``mask``."""

    lo: np.ndarray
    hi: np.ndarray
    mask: np.ndarray


class Halving(NamedTuple):
    """Scratch of a nominal halving: the left level set and the levels' hash keys."""

    left_set: np.ndarray
    keys: np.ndarray
    lev: np.ndarray


@njit(cache=True, nogil=True)
def _mix(z):
    z = z + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


@njit(cache=True, nogil=True)
def hash3(seed, code, salt):
    """64-bit hash of (tree seed, heap index, salt) — splitmix64 chained."""
    return _mix(np.uint64(seed) ^ _mix(np.uint64(code) ^ _mix(np.uint64(salt))))


@njit(cache=True, nogil=True)
def _n_levels_in(kind, lo, hi, mask, off, nlev):
    if kind == KIND_ORDERED:
        return int(np.floor(hi) - np.floor(lo))
    c = 0
    for k in range(nlev):
        c += mask[off + k]
    return c


@njit(cache=True, nogil=True)
def _choose(seed, code, cols, cell, cand):
    """Split column of a cell (-1 if none can be split): uniform over splittable columns."""
    kind, nlev, nom_off = cols
    lo, hi, mask = cell
    d = kind.shape[0]
    m = 0
    for j in range(d):
        if kind[j] == KIND_NUMERIC or _n_levels_in(kind[j], lo[j], hi[j], mask, nom_off[j],
                                                   nlev[j]) >= 2:
            cand[m] = j
            m += 1
    if m == 0:
        return -1
    return cand[int(hash3(seed, code, 0) % np.uint64(m))]


@njit(cache=True, nogil=True)
def short_decimal(v):
    """``v``, or the decimal of at most 9 significant digits within 4 ulps of it: a midpoint of
    decimal box ends computed in floating point (``0.5 * (10.2 + 24.4)`` is
    ``17.299999999999997``) becomes the decimal it stands for (17.3), so a row holding that
    value lies on the same side of the cut in float64 and after rounding to float32."""
    if v == 0.0 or not np.isfinite(v):
        return v
    tol = 4.0 * 2.220446049250313e-16 * abs(v)
    mag = np.floor(np.log10(abs(v)))
    for k in range(1, 10):
        scale = 10.0 ** (k - 1 - mag)
        r = np.round(v * scale) / scale
        if abs(r - v) <= tol:
            return r
    return v


@njit(cache=True, nogil=True)
def _split(seed, code, j, cols, cell, halving):
    """Threshold of the split of column ``j`` (numeric / ordered); fills ``left_set`` (nominal)."""
    kind, nlev, nom_off = cols
    lo, hi, mask = cell
    left_set, keys, lev = halving
    if kind[j] == KIND_NUMERIC:
        return short_decimal(0.5 * (lo[j] + hi[j]))
    m = _n_levels_in(kind[j], lo[j], hi[j], mask, nom_off[j], nlev[j])
    nl = m // 2
    if m % 2 == 1 and (hash3(seed, code, 1) & np.uint64(1)) == np.uint64(1):
        nl += 1
    if kind[j] == KIND_ORDERED:
        a = np.floor(lo[j]) + 1.0  # first allowed level
        return a + nl - 0.5
    o = nom_off[j]
    c = 0
    for k in range(nlev[j]):
        left_set[k] = 0
        if mask[o + k]:
            lev[c] = k
            keys[c] = hash3(seed, code, 2 + k)
            c += 1
    order = np.argsort(keys[:c])
    for r in range(nl):
        left_set[lev[order[r]]] = 1
    return np.nan


@njit(cache=True, nogil=True)
def _goes_left(x, j, kind, thr, left_set):
    if kind[j] == KIND_NOMINAL:
        return left_set[int(x)] == 1
    return x <= thr


@njit(cache=True, nogil=True)
def _narrow(left, j, thr, left_set, cols, cell):
    """Narrow ``cell`` in place to the ``left`` (or right) side of the split of column ``j``."""
    kind, nlev, nom_off = cols
    lo, hi, mask = cell
    if kind[j] == KIND_NOMINAL:
        o = nom_off[j]
        for k in range(nlev[j]):
            if mask[o + k] and (left_set[k] == 1) != left:
                mask[o + k] = 0
    elif left:
        hi[j] = thr
    else:
        lo[j] = thr


@njit(cache=True, nogil=True)
def _scratch(d, kmax, n_nom):
    """Per-call buffers of the midpoint rule: candidate columns, a nominal :class:`Halving`
    and the current :class:`Cell`."""
    return (np.empty(d, np.int64),
            Halving(np.zeros(kmax, np.uint8), np.empty(kmax, np.uint64), np.empty(kmax, np.int64)),
            Cell(np.empty(d), np.empty(d), np.ones(n_nom, np.uint8)))


@njit(cache=True, nogil=True)
def grow_midpoint_tree(Z, kind, box_lo, box_hi, root_mask, nlev, nom_off, n_nom, seed, depth):
    """Grow one RFDE tree on the rows of ``Z`` [n, d] (no NaN; discrete columns as codes) in the
    root box ``box_lo, box_hi`` with nominal levels ``root_mask`` (uint8 [n_nom]).

    Returns tree-local node arrays ``feature, threshold, left, right, cat_rows`` (``cat_rows``:
    [n_nodes, max_levels] left level sets of nominal splits) and per leaf (in node-id order)
    ``leaf_lo, leaf_hi`` [L, d], ``leaf_mask`` [L, n_nom], ``leaf_count`` [L], ``leaf_code`` [L].
    """
    n, d = Z.shape
    kmax = 1
    for j in range(d):
        kmax = max(kmax, nlev[j])
    max_nodes = max(2 * n - 1, 1)
    feature = np.full(max_nodes, -1, np.int32)
    threshold = np.full(max_nodes, np.nan)
    left = np.full(max_nodes, -1, np.int32)
    right = np.full(max_nodes, -1, np.int32)
    cat_rows = np.zeros((max_nodes, kmax), np.uint8)
    max_leaves = max(n, 1)
    leaf_lo = np.empty((max_leaves, d))
    leaf_hi = np.empty((max_leaves, d))
    leaf_mask = np.zeros((max_leaves, n_nom), np.uint8)
    leaf_count = np.zeros(max_leaves, np.int64)
    leaf_code = np.zeros(max_leaves, np.int64)

    S = depth + 3
    st_start = np.empty(S, np.int64)
    st_end = np.empty(S, np.int64)
    st_depth = np.empty(S, np.int64)
    st_code = np.empty(S, np.int64)
    st_parent = np.empty(S, np.int64)
    st_side = np.empty(S, np.int64)
    st_lo = np.empty((S, d))
    st_hi = np.empty((S, d))
    st_mask = np.ones((S, n_nom), np.uint8)
    idx = np.arange(n)
    cand, halving, cell = _scratch(d, kmax, n_nom)
    lo, hi, mask = cell
    left_set = halving.left_set
    cols = Columns(kind, nlev, nom_off)

    top = 0
    st_start[0] = 0
    st_end[0] = n
    st_depth[0] = 0
    st_code[0] = 1
    st_parent[0] = -1
    st_side[0] = 0
    st_lo[0, :] = box_lo
    st_hi[0, :] = box_hi
    st_mask[0, :] = root_mask
    top = 1
    n_nodes = 0
    n_leaves = 0
    while top > 0:
        top -= 1
        start = st_start[top]
        end = st_end[top]
        dep = st_depth[top]
        code = st_code[top]
        lo[:] = st_lo[top]
        hi[:] = st_hi[top]
        mask[:] = st_mask[top]
        node = n_nodes
        n_nodes += 1
        if st_parent[top] >= 0:
            if st_side[top] == 0:
                left[st_parent[top]] = node
            else:
                right[st_parent[top]] = node
        is_leaf = True
        while dep < depth:
            j = _choose(seed, code, cols, cell, cand)
            if j < 0:
                break
            thr = _split(seed, code, j, cols, cell, halving)
            # partition idx[start:end]: left rows first
            i = start
            k = end - 1
            while i <= k:
                if _goes_left(Z[idx[i], j], j, kind, thr, left_set):
                    i += 1
                else:
                    t = idx[i]
                    idx[i] = idx[k]
                    idx[k] = t
                    k -= 1
            mid = i
            if mid == end or mid == start:
                go_left = mid == end
                _narrow(go_left, j, thr, left_set, cols, cell)
                code = 2 * code + (0 if go_left else 1)
                dep += 1
                continue
            # both halves non-empty: an internal node
            feature[node] = j
            threshold[node] = thr
            if kind[j] == KIND_NOMINAL:
                for k2 in range(nlev[j]):
                    cat_rows[node, k2] = left_set[k2]
            for side in (1, 0):  # push right first so the left child is processed next
                st_start[top] = mid if side == 1 else start
                st_end[top] = end if side == 1 else mid
                st_depth[top] = dep + 1
                st_code[top] = 2 * code + side
                st_parent[top] = node
                st_side[top] = side
                st_lo[top, :] = lo
                st_hi[top, :] = hi
                st_mask[top, :] = mask
                _narrow(side == 0, j, thr, left_set, cols,
                        Cell(st_lo[top], st_hi[top], st_mask[top]))
                top += 1
            is_leaf = False
            break
        if is_leaf:
            leaf_lo[n_leaves, :] = lo
            leaf_hi[n_leaves, :] = hi
            leaf_mask[n_leaves, :] = mask
            leaf_count[n_leaves] = end - start
            leaf_code[n_leaves] = code
            n_leaves += 1
    return (feature[:n_nodes], threshold[:n_nodes], left[:n_nodes], right[:n_nodes],
            cat_rows[:n_nodes], leaf_lo[:n_leaves], leaf_hi[:n_leaves], leaf_mask[:n_leaves],
            leaf_count[:n_leaves], leaf_code[:n_leaves])


@njit(cache=True, nogil=True)
def route_codes(Z, kind, box_lo, box_hi, root_mask, nlev, nom_off, n_nom, seed, depth):
    """Depth-``k`` cell of every row for ``k = 0..depth``, without any data fitting.

    Returns heap codes ``[n, depth+1]`` (int64; a cell that cannot be split further keeps its
    code) and log reference volumes ``[n, depth+1]`` (Lebesgue on numeric columns, counting on
    discrete ones). Rows outside the box get code -1 and volume ``nan`` (never a cell).
    """
    n, d = Z.shape
    kmax = 1
    for j in range(d):
        kmax = max(kmax, nlev[j])
    codes = np.empty((n, depth + 1), np.int64)
    logv = np.empty((n, depth + 1))
    cand, halving, cell = _scratch(d, kmax, n_nom)
    lo, hi, mask = cell
    left_set = halving.left_set
    cols = Columns(kind, nlev, nom_off)
    for i in range(n):
        lo[:] = box_lo
        hi[:] = box_hi
        mask[:] = root_mask
        inside = True
        for j in range(d):
            x = Z[i, j]
            if kind[j] == KIND_NOMINAL:
                if not (x >= 0 and x < nlev[j]) or mask[nom_off[j] + int(x)] == 0:
                    inside = False
            elif not (x > lo[j] and x <= hi[j]):
                inside = False
        if not inside:
            codes[i, :] = -1
            logv[i, :] = np.nan
            continue
        code = 1
        for dep in range(depth + 1):
            lv = 0.0
            for j in range(d):
                if kind[j] == KIND_NUMERIC:
                    lv += np.log(hi[j] - lo[j])
                else:
                    lv += np.log(_n_levels_in(kind[j], lo[j], hi[j], mask, nom_off[j], nlev[j]))
            codes[i, dep] = code
            logv[i, dep] = lv
            if dep == depth:
                break
            j = _choose(seed, code, cols, cell, cand)
            if j < 0:
                continue
            thr = _split(seed, code, j, cols, cell, halving)
            go_left = _goes_left(Z[i, j], j, kind, thr, left_set)
            _narrow(go_left, j, thr, left_set, cols, cell)
            code = 2 * code + (0 if go_left else 1)
    return codes, logv
