"""Numba histogram tree grower for class-labelled rows under any split criterion.

The criterion is a gain of the children's per-class masses (:mod:`forestgen.tree.criteria`):
built-ins are dispatched by code; :func:`grow_tree_with` compiles this grower for a user gain.

One call grows one tree depth-first on binned codes (``Xb[d, n]`` from
:class:`forestgen.data.binning.Binner`). Per node it draws ``max_features`` candidate features
(partial Fisher-Yates from the tree's own ``numpy.random.Generator``), builds a weighted
per-class histogram for each, and scans the bins in order (numeric/ordinal columns) or sorted by
class ratio (nominal columns: the classic optimal ordering for two classes, Breiman et al. 1984).
Missing values form their own bin and are tried on both sides; the better side is remembered.

Constraints checked for every candidate child: weighted size ``>= min_samples_leaf`` and, per
class ``c``, weighted count ``>= min_class_leaf[c]`` (ARF's minimum number of *real* rows per
leaf). Rows are partitioned in place in one index buffer (``start, end`` ranges), as in
scikit-learn's tree builder.

Histograms are built directly for the node's candidate features, ``O(n_node * mtry)``. Sibling
subtraction (LightGBM) is not used: with random-forest ``mtry < d`` each node draws new features,
so the parent's histograms for them do not exist; subtraction would need all ``d`` histograms per
node, ``O(n_small * d)``, which is more work for ``mtry = sqrt(d)``.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from forestgen.tree.criteria import criterion_gain, specialise
from forestgen.tree.node_ops import binned_sides, draw_candidates, partition


@njit(cache=True, nogil=True)
def _fill_hist(hist, Xb, f, idx, start, end, y, w, nb):
    for b in range(nb + 1):
        for c in range(hist.shape[1]):
            hist[b, c] = 0.0
    for r in range(start, end):
        i = idx[r]
        hist[Xb[f, i], y[i]] += w[i]


@njit(cache=True, nogil=True)
def _scan_feature(hist, nb, is_nominal, parent, crit, min_leaf, min_class, order_buf, lbuf,
                  rbuf):
    """Best split of one feature's histogram under criterion ``crit``.

    Returns (gain, pos, nan_left, n_order); ``order_buf[:n_order]`` holds the bin order scanned;
    bins ``order_buf[:pos+1]`` go left.
    """
    C = hist.shape[1]
    miss = hist[nb]
    miss_w = 0.0
    for c in range(C):
        miss_w += miss[c]
    m = 0
    if is_nominal:
        keys = np.empty(nb)
        ref = 0
        best_v = -1.0
        for c in range(C):
            if parent[c] > best_v:
                best_v = parent[c]
                ref = c
        for b in range(nb):
            tot = 0.0
            for c in range(C):
                tot += hist[b, c]
            if tot > 0.0:
                order_buf[m] = b
                keys[m] = hist[b, ref] / tot
                m += 1
        perm = np.argsort(keys[:m], kind="mergesort")
        tmp = order_buf[:m].copy()
        for t in range(m):
            order_buf[t] = tmp[perm[t]]
    else:
        for b in range(nb):
            order_buf[b] = b
        m = nb
    best_gain = -np.inf
    best_pos = -1
    best_nan_left = False
    left = np.zeros(C)
    for pos in range(m - 1):
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
def grow_tree(
    Xb, n_bins, nominal, y, w, n_classes, max_depth, min_samples_leaf, min_class_leaf,
    max_features, min_gain, crit, rng,
):
    """Grow one tree; see the module docstring. Returns flat node arrays (tree-local ids):
    ``feature, thr_bin, nan_left, left, right, cat_off, cat_left, class_weight [n_nodes, C]``."""
    d = Xb.shape[0]
    idx = np.nonzero(w > 0.0)[0]
    n_in = idx.shape[0]
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
    hist = np.zeros((max_nb + 1, n_classes))
    order_buf = np.zeros(max_nb, np.int64)
    best_order = np.zeros(max_nb, np.int64)
    lbuf = np.zeros(n_classes)
    rbuf = np.zeros(n_classes)
    go = np.zeros(max_nb + 1, np.bool_)
    feats = np.arange(d)
    mtry = min(max(max_features, 1), d)

    st_node = np.empty(cap, np.int64)
    st_start = np.empty(cap, np.int64)
    st_end = np.empty(cap, np.int64)
    st_depth = np.empty(cap, np.int64)
    st_node[0] = 0
    st_start[0] = 0
    st_end[0] = n_in
    st_depth[0] = 0
    sp = 1
    n_nodes = 1
    for r in range(n_in):
        i = idx[r]
        value[0, y[i]] += w[i]

    while sp > 0:
        sp -= 1
        node = st_node[sp]
        start = st_start[sp]
        end = st_end[sp]
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
        if not can:
            continue
        draw_candidates(feats, mtry, rng)
        best_gain = min_gain
        best_f = -1
        best_pos = -1
        best_nl = False
        best_m = 0
        for t in range(mtry):
            f = feats[t]
            nb = n_bins[f]
            _fill_hist(hist, Xb, f, idx, start, end, y, w, nb)
            g, pos, nl, m = _scan_feature(
                hist, nb, nominal[f], parent, crit, min_samples_leaf, min_class_leaf,
                order_buf, lbuf, rbuf,
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
        mid = partition(idx, start, end, Xb[f], go)
        lnode = n_nodes
        rnode = n_nodes + 1
        n_nodes += 2
        left[node] = lnode
        right[node] = rnode
        for r in range(start, mid):
            i = idx[r]
            value[lnode, y[i]] += w[i]
        for c in range(n_classes):
            value[rnode, c] = parent[c] - value[lnode, c]
        # push right first so the left subtree is grown first (depth-first)
        st_node[sp] = rnode
        st_start[sp] = mid
        st_end[sp] = end
        st_depth[sp] = depth + 1
        sp += 1
        st_node[sp] = lnode
        st_start[sp] = start
        st_end[sp] = mid
        st_depth[sp] = depth + 1
        sp += 1
    return (
        feature[:n_nodes].copy(), thr_bin[:n_nodes].copy(), nan_left[:n_nodes].copy(),
        left[:n_nodes].copy(), right[:n_nodes].copy(), cat_off[:n_nodes].copy(),
        cat_buf[:cat_used].copy(), value[:n_nodes].copy(),
    )


def grow_tree_with(gain):
    """:func:`grow_tree` compiled for the user ``@njit`` ``gain`` (once per process)."""
    return specialise(grow_tree, (_scan_feature,), gain)
