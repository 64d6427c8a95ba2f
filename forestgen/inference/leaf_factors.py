"""Packed per-leaf factor tables for fused Numba walks (issue 15).

The leaf models' own kernels score one column over many (row, leaf) pairs; the fused walks of
:mod:`forestgen.inference.leaf_search` and :mod:`forestgen.inference.marginal_walk` score a
leaf on all of a row's evidence columns at once, as they reach it. :class:`LeafPack` copies the
parameters those evaluations read into one float64 record per leaf (the leaf's log weight, then
per column: truncated normal ``lo, hi, mu, sigma, lognorm``; categorical ``start, end, rest``
of its listed levels; uniform ``lo, hi``) and the listed ``(level, prob)`` entries of all
categorical columns leaf by leaf, so a leaf costs a few consecutive cache lines.
:func:`leaf_log_weight` evaluates ``log pi_k + sum_j log g_kj(x_j)`` with the same
floating-point operations, in the same column order, as :meth:`LeafModel.log_prob` summed by
:meth:`GenerativeForest.log_prob`, so fused and per-column paths agree bit for bit. Leaf models
without an in-kernel evaluator (:func:`leaf_kind` 0: point masses, rounded-normal tails, user
subclasses) are left to the per-column paths.

Memory: ``8 L (1 + 5 n_truncnorm + 3 n_categorical + 2 n_uniform + ceil(b / 8))`` bytes for
``L`` leaves with ``b`` bytes of the categorical columns' allowed-level bits, ``16`` per listed
level, ``16`` per node and ``16 L`` for the leaf order (plus a few per column); the pack is
built on first use and kept while the model lives (:func:`leaf_pack`).
"""

from __future__ import annotations

import weakref

import numpy as np
from numba import njit

from forestgen.leaves.categorical import CategoricalLeaf
from forestgen.leaves.truncnorm import TruncNormalLeaf
from forestgen.leaves.uniform import UniformLeaf

TRUNCNORM, CATEGORICAL, UNIFORM = 1, 2, 3
_WIDTH = {TRUNCNORM: 5, CATEGORICAL: 3, UNIFORM: 2}


def leaf_kind(lm) -> int:
    """The in-kernel evaluator of a leaf model (0: none, it is not supported here)."""
    t = type(lm)
    if t.log_prob is TruncNormalLeaf.log_prob:
        return TRUNCNORM
    if t.log_prob is CategoricalLeaf.log_prob:  # (also OrdinalKernelLeaf; not its
        return CATEGORICAL                      # rounded-normal-tail subclass)
    if t.log_prob is UniformLeaf.log_prob:
        return UNIFORM
    return 0


def supported_columns(model) -> np.ndarray:
    """bool ``[d]``: columns whose point evidence the in-kernel factors can weigh."""
    return np.array([leaf_kind(lm) > 0 for lm in model.leaf_models_], bool)


class LeafPack:
    """The packed tables (see the module docstring), the leaf records in the order a
    depth-first walk of each tree reaches them (right subtrees first, as
    :func:`~forestgen.tree.kernels.walk_kernel`), with the forest's nodes in that walk order
    too, so the leaves and nodes under a split lie in one stretch of memory.

    :attr:`args` is the ``tabs`` tuple of :func:`leaf_log_weight`: ``rec [L, W]`` (row
    ``r`` holds leaf ``leaf_id[r]``), ``pos [d]`` (first field of each column in a record,
    -1: unsupported), ``kind [d]``, ``pairs [nnz, 2]`` (level code, probability), ``bits``
    (``rec``'s bytes; the allowed-level bits end each record), ``bpos [d]`` (their byte),
    ``base [d, kmax]``, ``nlev [d]``, ``floor [d]``. :attr:`nodes` is ``(node [N, 2] int64,
    the same memory as float64, roots)``: one
    16-byte record per node in walk order, ``node[n, 0]`` the threshold (float64 bits) or the
    level-set offset of a nominal split, ``node[n, 1]`` = ``left << 24 | feature << 3 | leaf
    << 2 | nominal << 1 | nan_left``; an internal node's right child is the next node, ``left``
    its left one; a leaf's ``left`` is its record row. ``row [L]``: the record row of each
    leaf id.
    """

    def __init__(self, model):
        models = model.leaf_models_
        f = model.forest_
        d = len(models)
        order = _walk_order(f.feature, f.left, f.right, f.roots,
                            int(np.diff(f.node_offsets).max()) if f.n_trees else 1)
        new = np.empty(len(f.feature), np.int64)
        new[order] = np.arange(len(order))
        feat = np.ascontiguousarray(f.feature[order])
        leaf_nodes = order[feat < 0]
        self.leaf_id = f.node_leaf[leaf_nodes].astype(np.int64)
        L = len(self.leaf_id)
        self.row = np.empty(L, np.int64)
        self.row[self.leaf_id] = np.arange(L)
        left = np.where(feat >= 0, new[np.maximum(f.left[order], 0)], 0)
        left[feat < 0] = np.arange(L)
        cat = f.cat_off[order] >= 0
        node = np.empty((len(order), 2), np.int64)
        node[:, 0] = np.where(cat, f.cat_off[order], f.threshold[order].view(np.int64))
        node[:, 1] = ((left << 24) | (np.maximum(feat, 0).astype(np.int64) << 3)
                      | ((feat < 0).astype(np.int64) << 2) | (cat.astype(np.int64) << 1)
                      | (f.nan_left[order] == 1).astype(np.int64))
        self.nodes = (node, node.view(np.float64), new[f.roots].astype(np.int64))
        self.depth = int(_max_depth(node, self.nodes[2]))
        lid = self.leaf_id
        lw = np.asarray(model.leaf_log_weight_, np.float64)[lid]
        kind = np.array([leaf_kind(lm) for lm in models], np.int64)
        pos = np.full(d, -1, np.int64)
        w = 1
        for j in range(d):
            if kind[j]:
                pos[j] = w
                w += _WIDTH[int(kind[j])]
        cats = [j for j in range(d) if kind[j] == CATEGORICAL]
        bpos = np.zeros(d, np.int64)  # the allowed-level bits close each record
        nb = 8 * w
        for j in cats:
            bpos[j] = nb
            nb += models[j].allowed_.shape[1]
        rec = np.zeros((L, -(-nb // 8)))
        bits = rec.view(np.uint8)
        rec[:, 0] = lw
        counts = [np.diff(models[j].offset_)[lid] for j in cats]
        per_leaf = np.sum(counts, axis=0) if cats else np.zeros(L, np.int64)
        start = np.concatenate([[0], np.cumsum(per_leaf)])[:-1]
        pairs = np.empty((int(per_leaf.sum()), 2))
        kmax = max([models[j].n_levels for j in cats], default=1)
        base = np.zeros((d, kmax))
        nlev = np.zeros(d, np.int64)
        floor = np.zeros(d)
        acc = start.copy()
        for j in range(d):
            lm, p = models[j], pos[j]
            if kind[j] == TRUNCNORM:
                if not hasattr(lm, "lognorm_"):
                    lm.log_prob(np.zeros(0, np.int64), np.zeros(0))  # builds lognorm_
                for q, a in enumerate((lm.lo_, lm.hi_, lm.mu_, lm.sigma_, lm.lognorm_)):
                    rec[:, p + q] = a[lid]
            elif kind[j] == UNIFORM:
                rec[:, p], rec[:, p + 1] = lm.lo_[lid], lm.hi_[lid]
            elif kind[j] == CATEGORICAL:
                cnt = np.diff(lm.offset_)[lid]
                rec[:, p], rec[:, p + 1], rec[:, p + 2] = acc, acc + cnt, lm.rest_[lid]
                within = np.arange(int(cnt.sum())) - np.repeat(np.cumsum(cnt) - cnt, cnt)
                src = np.repeat(lm.offset_[:-1][lid], cnt) + within
                dest = np.repeat(acc, cnt) + within
                pairs[dest, 0] = lm.code_[src]
                pairs[dest, 1] = lm.prob_[src]
                acc += cnt
                bits[:, bpos[j]: bpos[j] + lm.allowed_.shape[1]] = lm.allowed_[lid]
                base[j, : lm.n_levels] = lm.base_
                nlev[j] = lm.n_levels
                floor[j] = float(lm.floor)
        self.kind, self.pos = kind, pos
        self.args = (rec, pos, kind, pairs, bits, bpos, base, nlev, floor)

    @property
    def nbytes(self) -> int:
        node, _, roots = self.nodes  # (the second is a view of the first)
        own = [a for k, a in enumerate(self.args) if k != 4]  # (bits: a view of rec)
        return int(sum(a.nbytes for a in own) + node.nbytes + roots.nbytes
                   + self.row.nbytes + self.leaf_id.nbytes)


@njit(cache=True, nogil=True)
def _max_depth(node, roots):
    """Largest depth of a node (walk order: a parent comes before its children)."""
    depth = np.zeros(node.shape[0], np.int64)
    best = 0
    for n in range(node.shape[0]):
        meta = node[n, 1]
        if not (meta >> 2) & 1:
            depth[n + 1] = depth[n] + 1
            depth[meta >> 24] = depth[n] + 1
            best = max(best, depth[n] + 1)
    return best


@njit(cache=True, nogil=True)
def _walk_order(feature, left, right, roots, max_nodes):
    """Every node, tree by tree, in depth-first order with right subtrees first."""
    order = np.empty(feature.shape[0], np.int64)
    stack = np.empty(max_nodes + 2, np.int64)
    t = 0
    for b in range(roots.shape[0]):
        stack[0] = roots[b]
        sp = 1
        while sp > 0:
            sp -= 1
            n = stack[sp]
            order[t] = n
            t += 1
            if feature[n] >= 0:
                stack[sp] = left[n]
                stack[sp + 1] = right[n]
                sp += 2
    return order[:t]


_CACHE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def leaf_pack(model) -> LeafPack:
    """The model's :class:`LeafPack` (built on first use, kept while the model lives and its
    leaf models and leaf weights are the same objects)."""
    key = (id(model.leaf_log_weight_), tuple(id(lm) for lm in model.leaf_models_))
    hit = _CACHE.get(model)
    if hit is None or hit[0] != key:
        hit = (key, LeafPack(model))
        _CACHE[model] = hit
    return hit[1]


@njit(cache=True, nogil=True, inline="always")
def route(x, n, nodes, cat_left, n_levels):
    """Sides a row with value ``x`` on node ``n``'s split column takes: 1 left, 2 right, 3 both
    (``x`` NaN: marginalised), as :func:`~forestgen.tree.kernels.go_left` routes a value."""
    if np.isnan(x):
        return 3
    node, fnode, _ = nodes
    meta = node[n, 1]
    if (meta >> 1) & 1:
        k = n_levels[(meta >> 3) & 0x1FFFFF]
        code = int(x)
        if code < 0 or code >= k or code != x:
            return 1 if meta & 1 else 2
        return 1 if cat_left[node[n, 0] + code] == 1 else 2
    return 1 if x <= fnode[n, 0] else 2


@njit(cache=True, nogil=True, inline="always")
def _level_prob(pairs, bits, bpos, base, rec, leaf, p, j, c):
    """p(level c | leaf) of categorical column ``j`` (as ``categorical.level_prob``)."""
    lo = np.int64(rec[leaf, p])
    end = np.int64(rec[leaf, p + 1])
    hi = end
    while lo < hi:
        mid = (lo + hi) >> 1
        if pairs[mid, 0] < c:
            lo = mid + 1
        else:
            hi = mid
    if lo < end and pairs[lo, 0] == c:
        return pairs[lo, 1]
    if (bits[leaf, bpos[j] + (c >> 3)] >> (c & 7)) & 1:
        return rec[leaf, p + 2] * base[j, c]
    return 0.0


@njit(cache=True, nogil=True, inline="always")
def add_pmf(acc, i, off, w, tabs, r, j):
    """``acc[i, off + c] += w * p(level c | record r)`` for every level ``c`` of categorical
    column ``j`` (the values of :meth:`CategoricalLeaf.probs`)."""
    rec, pos, _, pairs, bits, bpos, base, nlev, _ = tabs
    p = pos[j]
    e = np.int64(rec[r, p])
    end = np.int64(rec[r, p + 1])
    rest = rec[r, p + 2]
    for c in range(nlev[j]):
        if e < end and pairs[e, 0] == c:
            v = pairs[e, 1]
            e += 1
        elif (bits[r, bpos[j] + (c >> 3)] >> (c & 7)) & 1:
            v = rest * base[j, c]
        else:
            v = 0.0
        acc[i, off + c] += w * v


@njit(cache=True, nogil=True)
def leaf_log_weight(i, leaf, X, ecols, ne, tabs):
    """``log pi_leaf + sum_j log g_leaf,j(X[i, j])`` over the columns ``ecols[:ne]`` (in
    increasing order; ``tabs`` is :attr:`LeafPack.args`)."""
    rec, pos, kind, pairs, bits, bpos, base, nlev, floor = tabs
    lp = rec[leaf, 0]
    for q in range(ne):
        j = ecols[q]
        x = X[i, j]
        p = pos[j]
        kd = kind[j]
        if kd == TRUNCNORM:
            if x > rec[leaf, p] and x <= rec[leaf, p + 1]:
                z = (x - rec[leaf, p + 2]) / rec[leaf, p + 3]
                lp += -0.5 * z * z - rec[leaf, p + 4]
            else:
                return -np.inf
        elif kd == CATEGORICAL:
            c = int(x)
            pr = 0.0
            if c == x and 0 <= c < nlev[j]:
                pr = _level_prob(pairs, bits, bpos, base, rec, leaf, p, j, c)
            fl = floor[j]  # as CategoricalLeaf.log_prob: a level below the floor scores it
            lp += np.log(pr) if pr > fl else (np.log(fl) if fl > 0 else -np.inf)
        else:
            lo = rec[leaf, p]
            hi = rec[leaf, p + 1]
            if x > lo and x <= hi:
                lp += -np.log(hi - lo)
            else:
                return -np.inf
        if lp == -np.inf:
            return lp
    return lp
