"""Numba histogram tree grower for class-labelled rows under any split criterion.

The criterion is a gain of the children's per-class masses (:mod:`forestgen.tree.criteria`):
built-ins are dispatched by code; :func:`grow_tree_with` compiles this grower for a user gain.

One call grows one tree depth-first on binned codes (``Xb[d, n]``, uint8 or uint16, from
:class:`forestgen.data.binning.Binner`). Per node it draws ``max_features`` candidate features
(partial Fisher-Yates from the tree's own ``numpy.random.Generator``), builds a weighted
per-class histogram for each in one pass over the node's rows, and scans the bins in order
(numeric/ordinal columns) or sorted by class ratio (nominal columns: the classic optimal
ordering for two classes, Breiman et al. 1984). Missing values form their own bin and are tried
on both sides; the better side is remembered.

Constraints checked for every candidate child: weighted size ``>= min_samples_leaf`` and, per
class ``c``, weighted count ``>= min_class_leaf[c]`` (ARF's minimum number of *real* rows per
leaf).

Work per node is kept proportional to the node's rows, not to the bins:

* Rows are kept in one index buffer (``start, end`` ranges, as in scikit-learn's tree builder)
  and partitioned *stably*, so every node's rows stay in increasing order and the histogram
  pass reads the code, label and weight arrays front to back.
* A node with fewer rows than a quarter of a feature's bins builds a *sparse* histogram: only
  the bins its rows occupy are cleared, listed (sorted) and scanned. Empty bins never change a
  split's class sums and are skipped by the dense scan too, so both give the same split.
* The left child's class weights are summed during the partition (the right child's are the
  parent's minus the left's).

Out-of-bag rows (weight 0) take no part in the tree, but with ``route_all`` they are carried
in a second index buffer and partitioned along, so the grower also returns the node every row
reaches (``row_node``): what a forest's out-of-bag votes and the leaves of its training rows
would otherwise need a second pass over all rows and trees for (``ForestArrays.apply``). Codes
route as the thresholds do (``code <= b`` iff ``x <= thresholds[b]``; missing follows
``nan_left``), so ``row_node`` equals that pass's answer.

Histograms are built directly for the node's candidate features, ``O(n_node * mtry)``. Sibling
subtraction (LightGBM) is not used: with random-forest ``mtry < d`` each node draws new features,
so the parent's histograms for them do not exist; subtraction would need all ``d`` histograms per
node, ``O(n_small * d)``, which is more work for ``mtry = sqrt(d)``.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from forestgen.tree.criteria import ENTROPY, GINI, criterion_gain, specialise
from forestgen.tree.node_ops import binned_sides, draw_candidates

SPARSE_RATIO = 1.0  # a feature's histogram is sparse when the node has < ratio * n_bins rows
SORT_MAX = 16  # occupied bins sorted by insertion up to this many, else listed from the flags


@njit(cache=True, nogil=True)
def _fill_hists(hist, rec, feats, mtry, start, end, ry, rw, n_bins, sparse, touched, occ,
                n_occ):
    """Per-class weight histograms of the candidate features ``feats[:mtry]`` over the row
    records ``start:end`` (codes ``rec [m, d]``, labels ``ry``, weights ``rw``). With every
    feature dense, one pass over the rows fills them all; a feature with ``sparse[t]`` clears
    and lists (in ``occ[t, :n_occ[t]]``, sorted) only the bins its rows occupy. The missing
    bin ``n_bins[f]`` is always cleared and never listed."""
    C = hist.shape[2]
    any_sparse = False
    for t in range(mtry):
        n_occ[t] = 0
        if sparse[t]:
            any_sparse = True
            continue
        for b in range(n_bins[feats[t]] + 1):
            for c in range(C):
                hist[t, b, c] = 0.0
    if not any_sparse:
        for r in range(start, end):
            yi = ry[r]
            wi = rw[r]
            for t in range(mtry):
                hist[t, rec[r, feats[t]], yi] += wi
        return
    for t in range(mtry):
        f = feats[t]
        if sparse[t]:
            _fill_sparse(hist[t], touched[t], occ[t], n_occ, t, rec, f, start, end, ry, rw,
                         n_bins[f])
            continue
        for r in range(start, end):
            hist[t, rec[r, f], ry[r]] += rw[r]


@njit(cache=True, nogil=True)
def _fill_sparse(h, tch, o, n_occ, t, rec, f, start, end, ry, rw, nb):
    """One feature's sparse histogram ``h``: bins cleared as the rows first reach them, then
    listed in increasing order in ``o[:n_occ[t]]`` (flags ``tch`` left clear)."""
    C = h.shape[1]
    for c in range(C):
        h[nb, c] = 0.0
    tch[nb] = True
    m = 0
    for r in range(start, end):
        b = rec[r, f]
        if not tch[b]:
            tch[b] = True
            o[m] = b
            m += 1
            for c in range(C):
                h[b, c] = 0.0
        h[b, ry[r]] += rw[r]
    tch[nb] = False
    n_occ[t] = m
    if m > SORT_MAX:  # list the flags in bin order (and clear them)
        q = 0
        for b in range(nb):
            if tch[b]:
                tch[b] = False
                o[q] = b
                q += 1
        return
    for q in range(m):  # insertion sort (m is small), then clear the flags
        v = o[q]
        tch[v] = False
        p = q - 1
        while p >= 0 and o[p] > v:
            o[p + 1] = o[p]
            p -= 1
        o[p + 1] = v


@njit(cache=True, nogil=True, inline="always")
def _impurity2(code, l0, l1, r0, r1):
    """:func:`~forestgen.tree.criteria.criterion_gain` of two classes (Gini or entropy) from
    scalars, with the same operations in the same order (same bits)."""
    WL = 0.0 + l0 + l1
    WR = 0.0 + r0 + r1
    W = WL + WR
    if W <= 0.0:
        return 0.0
    if code == GINI:
        p0 = l0 + r0
        p1 = l1 + r1
        sL = 0.0 + l0 * l0 + l1 * l1
        sR = 0.0 + r0 * r0 + r1 * r1
        sP = 0.0 + p0 * p0 + p1 * p1
        out = W - sP / W
        if WL > 0.0:
            out -= WL - sL / WL
        if WR > 0.0:
            out -= WR - sR / WR
        return out
    out = 0.0
    for c in range(2):
        lc = l0 if c == 0 else l1
        rc = r0 if c == 0 else r1
        p = lc + rc
        if p > 0.0:
            out -= p * np.log(p / W)
        if lc > 0.0:
            out += lc * np.log(lc / WL)
        if rc > 0.0:
            out += rc * np.log(rc / WR)
    return out


@njit(cache=True, nogil=True)
def _scan_binary(hist, order_buf, n_scan, miss, miss_w, parent, crit, min_leaf, min_class):
    """The scan of :func:`_scan_feature` for two classes under a built-in criterion, on
    scalars (no per-candidate buffers); same splits, same bits."""
    best_gain = -np.inf
    best_pos = -1
    best_nan_left = False
    m0 = miss[0]
    m1 = miss[1]
    p0 = parent[0]
    p1 = parent[1]
    c0 = min_class[0]
    c1 = min_class[1]
    l0 = 0.0
    l1 = 0.0
    for pos in range(n_scan):
        b = order_buf[pos]
        h0 = hist[b, 0]
        h1 = hist[b, 1]
        l0 += h0
        l1 += h1
        if 0.0 + h0 + h1 <= 0.0:
            continue
        for side in range(2):
            nan_left = side == 0
            if miss_w <= 0.0 and not nan_left:
                continue
            a0 = l0 + (m0 if nan_left else 0.0)
            a1 = l1 + (m1 if nan_left else 0.0)
            r0 = p0 - a0
            r1 = p1 - a1
            WL = 0.0 + a0 + a1
            WR = 0.0 + r0 + r1
            if (a0 < c0 or r0 < c0 or a1 < c1 or r1 < c1 or WL < min_leaf or WR < min_leaf
                    or WL <= 0.0 or WR <= 0.0):
                continue
            gain = _impurity2(crit, a0, a1, r0, r1)
            if gain > best_gain:
                best_gain = gain
                best_pos = pos
                if miss_w > 0.0:
                    best_nan_left = nan_left
                else:
                    best_nan_left = WL >= WR
    return best_gain, best_pos, best_nan_left


@njit(cache=True, nogil=True)
def _scan_feature(hist, nb, is_nominal, parent, crit, min_leaf, min_class, order_buf, m,
                  is_sparse, keys, left, lbuf, rbuf):
    """Best split of one feature's histogram under criterion ``crit``.

    Candidate bins: ``0..nb-1`` (dense numeric), or ``order_buf[:m]`` when ``is_sparse`` (the
    occupied bins, increasing). Nominal columns scan their occupied bins sorted by class ratio
    (stable). Returns (gain, pos, nan_left, n_order); ``order_buf[:n_order]`` holds the bin
    order scanned; bins ``order_buf[:pos+1]`` go left.
    """
    C = hist.shape[1]
    miss = hist[nb]
    miss_w = 0.0
    for c in range(C):
        miss_w += miss[c]
    if is_nominal:
        if not is_sparse:
            m = 0
            for b in range(nb):
                tot = 0.0
                for c in range(C):
                    tot += hist[b, c]
                if tot > 0.0:
                    order_buf[m] = b
                    m += 1
        ref = 0
        best_v = -1.0
        for c in range(C):
            if parent[c] > best_v:
                best_v = parent[c]
                ref = c
        for q in range(m):
            b = order_buf[q]
            tot = 0.0
            for c in range(C):
                tot += hist[b, c]
            keys[q] = hist[b, ref] / tot
        for q in range(1, m):  # stable insertion sort by key
            kq = keys[q]
            bq = order_buf[q]
            p = q - 1
            while p >= 0 and keys[p] > kq:
                keys[p + 1] = keys[p]
                order_buf[p + 1] = order_buf[p]
                p -= 1
            keys[p + 1] = kq
            order_buf[p + 1] = bq
        n_scan = m - 1
    elif is_sparse:
        # the last bin is never a split point (everything would go left)
        n_scan = m - 1 if m > 0 and order_buf[m - 1] == nb - 1 else m
    else:
        for b in range(nb):
            order_buf[b] = b
        m = nb
        n_scan = nb - 1
    if C == 2 and (crit == GINI or crit == ENTROPY):
        g, pos, nl = _scan_binary(hist, order_buf, n_scan, miss, miss_w, parent, crit,
                                  min_leaf, min_class)
        return g, pos, nl, m
    best_gain = -np.inf
    best_pos = -1
    best_nan_left = False
    for c in range(C):
        left[c] = 0.0
    for pos in range(n_scan):
        b = order_buf[pos]
        tot = 0.0
        for c in range(C):
            left[c] += hist[b, c]
            tot += hist[b, c]
        if tot <= 0.0:
            continue
        for side in range(2):
            nan_left = side == 0
            if miss_w <= 0.0 and not nan_left:
                continue
            WL = 0.0
            WR = 0.0
            ok = True
            for c in range(C):
                lc = left[c] + (miss[c] if nan_left else 0.0)
                rc = parent[c] - lc
                lbuf[c] = lc
                rbuf[c] = rc
                WL += lc
                WR += rc
                if lc < min_class[c] or rc < min_class[c]:
                    ok = False
            if not ok or WL < min_leaf or WR < min_leaf or WL <= 0.0 or WR <= 0.0:
                continue
            gain = criterion_gain(crit, lbuf, rbuf)
            if gain > best_gain:
                best_gain = gain
                best_pos = pos
                if miss_w > 0.0:
                    best_nan_left = nan_left
                else:
                    best_nan_left = WL >= WR
    return best_gain, best_pos, best_nan_left, m


@njit(cache=True, nogil=True)
def _gather_records(Xb, rows, rec, rid):
    """Row records of ``rows``: their codes ``rec [m, d]`` (row-major) and ids ``rid``."""
    for r in range(rows.shape[0]):
        rid[r] = rows[r]
    for j in range(Xb.shape[0]):
        col = Xb[j]
        for r in range(rows.shape[0]):
            rec[r, j] = col[rows[r]]


@njit(cache=True, nogil=True)
def _partition_records(rec, rid, ry, rw, start, end, f, go_left, s_rec, s_rid, s_y, s_w,
                       labelled, lsum):
    """Stable partition of the records ``start:end`` by ``go_left[rec[r, f]]``: the rows going
    left first, each side keeping its order; with ``labelled``, labels ``ry`` and weights
    ``rw`` move along and the left rows' class weights are added to ``lsum``. Returns the
    split point."""
    d = rec.shape[1]
    mid = start
    nr = 0
    for r in range(start, end):
        if go_left[rec[r, f]]:
            if mid != r:
                for j in range(d):
                    rec[mid, j] = rec[r, j]
                rid[mid] = rid[r]
                if labelled:
                    ry[mid] = ry[r]
                    rw[mid] = rw[r]
            if labelled:
                lsum[ry[mid]] += rw[mid]
            mid += 1
        else:
            for j in range(d):
                s_rec[nr, j] = rec[r, j]
            s_rid[nr] = rid[r]
            if labelled:
                s_y[nr] = ry[r]
                s_w[nr] = rw[r]
            nr += 1
    for q in range(nr):
        for j in range(d):
            rec[mid + q, j] = s_rec[q, j]
        rid[mid + q] = s_rid[q]
        if labelled:
            ry[mid + q] = s_y[q]
            rw[mid + q] = s_w[q]
    return mid


@njit(cache=True, nogil=True)
def grow_tree(
    Xb, n_bins, nominal, y, w, n_classes, max_depth, min_samples_leaf, min_class_leaf,
    max_features, min_gain, crit, rng, route_all, sparse_ratio,
):
    """Grow one tree; see the module docstring. Returns flat node arrays (tree-local ids):
    ``feature, thr_bin, nan_left, left, right, cat_off, cat_left, class_weight [n_nodes, C]``
    and ``row_node [n]`` (the node each row reaches; empty unless ``route_all``).
    ``sparse_ratio``: a feature's histogram is sparse when the node has fewer rows than this
    times its bins (0: never; any value grows the same tree)."""
    d = Xb.shape[0]
    n = Xb.shape[1]
    n_in = 0
    for i in range(n):
        if w[i] > 0.0:
            n_in += 1
    idx = np.empty(n_in, np.int64)
    oidx = np.empty(n - n_in if route_all else 0, np.int64)
    q_in = 0
    q_out = 0
    for i in range(n):
        if w[i] > 0.0:
            idx[q_in] = i
            q_in += 1
        elif route_all:
            oidx[q_out] = i
            q_out += 1
    n_out = q_out
    # compact row records, kept contiguous per node: codes (row-major), id, label, weight
    rec = np.empty((n_in, d), Xb.dtype)
    rid = np.empty(n_in, np.int64)
    _gather_records(Xb, idx, rec, rid)
    ry = np.empty(n_in, np.int64)
    rw = np.empty(n_in)
    for r in range(n_in):
        ry[r] = y[idx[r]]
        rw[r] = w[idx[r]]
    orec = np.empty((n_out, d), Xb.dtype)
    orid = np.empty(n_out, np.int64)
    _gather_records(Xb, oidx, orec, orid)
    m_s = max(n_in, n_out)
    s_rec = np.empty((m_s, d), Xb.dtype)
    s_rid = np.empty(m_s, np.int64)
    s_y = np.empty(m_s, np.int64)
    s_w = np.empty(m_s)
    row_node = np.full(n if route_all else 0, -1, np.int32)
    cap = 2 * max(n_in, 1) + 1
    feature = np.full(cap, -1, np.int32)
    thr_bin = np.full(cap, -1, np.int32)
    nan_left = np.zeros(cap, np.uint8)
    left = np.full(cap, -1, np.int32)
    right = np.full(cap, -1, np.int32)
    cat_off = np.full(cap, -1, np.int64)
    value = np.zeros((cap, n_classes))
    cat_cap = 1024
    cat_buf = np.zeros(cat_cap, np.uint8)
    cat_used = 0
    max_nb = 1
    for f in range(d):
        if n_bins[f] > max_nb:
            max_nb = n_bins[f]
    mtry = min(max(max_features, 1), d)
    hist = np.zeros((mtry, max_nb + 1, n_classes))
    touched = np.zeros((mtry, max_nb + 1), np.bool_)
    occ = np.zeros((mtry, max_nb + 1), np.int64)
    n_occ = np.zeros(mtry, np.int64)
    sparse = np.zeros(mtry, np.bool_)
    order_buf = np.zeros(max_nb, np.int64)
    best_order = np.zeros(max_nb, np.int64)
    keys = np.zeros(max_nb)
    lsum = np.zeros(n_classes)
    lbuf = np.zeros(n_classes)
    rbuf = np.zeros(n_classes)
    go = np.zeros(max_nb + 1, np.bool_)
    feats = np.arange(d)

    st_node = np.empty(cap, np.int64)
    st_start = np.empty(cap, np.int64)
    st_end = np.empty(cap, np.int64)
    st_ostart = np.empty(cap, np.int64)
    st_oend = np.empty(cap, np.int64)
    st_depth = np.empty(cap, np.int64)
    st_node[0] = 0
    st_start[0] = 0
    st_end[0] = n_in
    st_ostart[0] = 0
    st_oend[0] = n_out
    st_depth[0] = 0
    sp = 1
    n_nodes = 1
    for r in range(n_in):
        value[0, ry[r]] += rw[r]

    while sp > 0:
        sp -= 1
        node = st_node[sp]
        start = st_start[sp]
        end = st_end[sp]
        ostart = st_ostart[sp]
        oend = st_oend[sp]
        depth = st_depth[sp]
        parent = value[node]
        W = 0.0
        n_pos = 0
        can = True
        for c in range(n_classes):
            W += parent[c]
            if parent[c] > 0.0:
                n_pos += 1
            if parent[c] < 2.0 * min_class_leaf[c]:
                can = False
        if (max_depth >= 0 and depth >= max_depth) or W < 2.0 * min_samples_leaf or n_pos <= 1:
            can = False
        best_f = -1
        if can:
            draw_candidates(feats, mtry, rng)
            rows = end - start
            for t in range(mtry):
                sparse[t] = rows < sparse_ratio * n_bins[feats[t]]
            _fill_hists(hist, rec, feats, mtry, start, end, ry, rw, n_bins, sparse, touched,
                        occ, n_occ)
            best_gain = min_gain
            best_pos = -1
            best_nl = False
            best_m = 0
            for t in range(mtry):
                f = feats[t]
                nb = n_bins[f]
                if sparse[t]:
                    for q in range(n_occ[t]):
                        order_buf[q] = occ[t, q]
                g, pos, nl, m = _scan_feature(
                    hist[t], nb, nominal[f], parent, crit, min_samples_leaf, min_class_leaf,
                    order_buf, n_occ[t], sparse[t], keys, lsum, lbuf, rbuf,
                )
                if pos >= 0 and g > best_gain:
                    best_gain = g
                    best_f = f
                    best_pos = pos
                    best_nl = nl
                    best_m = m
                    for q in range(m):
                        best_order[q] = order_buf[q]
        if best_f < 0:
            if route_all:
                for r in range(start, end):
                    row_node[rid[r]] = node
                for r in range(ostart, oend):
                    row_node[orid[r]] = node
            continue
        f = best_f
        nb = n_bins[f]
        feature[node] = f
        nan_left[node] = 1 if best_nl else 0
        off = 0
        if nominal[f]:
            if cat_used + nb > cat_cap:
                new_cap = max(2 * cat_cap, cat_used + nb)
                nbuf = np.zeros(new_cap, np.uint8)
                nbuf[:cat_used] = cat_buf[:cat_used]
                cat_buf = nbuf
                cat_cap = new_cap
            cat_off[node] = cat_used
            off = cat_used
            # levels unseen in this node follow the missing direction
            for q in range(nb):
                cat_buf[cat_used + q] = 1 if best_nl else 0
            for q in range(best_m):
                cat_buf[cat_used + best_order[q]] = 1 if q <= best_pos else 0
            cat_used += nb
        else:
            thr_bin[node] = best_order[best_pos]
        binned_sides(go, nb, nominal[f], cat_buf[off:off + nb], thr_bin[node], best_nl)
        lnode = n_nodes
        rnode = n_nodes + 1
        n_nodes += 2
        left[node] = lnode
        right[node] = rnode
        mid = _partition_records(rec, rid, ry, rw, start, end, f, go, s_rec, s_rid, s_y, s_w,
                                 True, value[lnode])
        omid = ostart
        if route_all:
            omid = _partition_records(orec, orid, ry, rw, ostart, oend, f, go, s_rec, s_rid,
                                      s_y, s_w, False, lsum)
        for c in range(n_classes):
            value[rnode, c] = parent[c] - value[lnode, c]
        # push right first so the left subtree is grown first (depth-first)
        st_node[sp] = rnode
        st_start[sp] = mid
        st_end[sp] = end
        st_ostart[sp] = omid
        st_oend[sp] = oend
        st_depth[sp] = depth + 1
        sp += 1
        st_node[sp] = lnode
        st_start[sp] = start
        st_end[sp] = mid
        st_ostart[sp] = ostart
        st_oend[sp] = omid
        st_depth[sp] = depth + 1
        sp += 1
    return (
        feature[:n_nodes].copy(), thr_bin[:n_nodes].copy(), nan_left[:n_nodes].copy(),
        left[:n_nodes].copy(), right[:n_nodes].copy(), cat_off[:n_nodes].copy(),
        cat_buf[:cat_used].copy(), value[:n_nodes].copy(), row_node,
    )


def grow_tree_with(gain):
    """:func:`grow_tree` compiled for the user ``@njit`` ``gain`` (once per process)."""
    return specialise(grow_tree, (_scan_feature,), gain)
