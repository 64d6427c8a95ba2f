"""Packed per-leaf factor tables for fused Numba walks (issue 15).

The leaf models' own kernels score one column over many (row, leaf) pairs; the fused walks of
:mod:`forestgen.inference.leaf_search` and :mod:`forestgen.inference.marginal_walk` score a
leaf on all of a row's evidence columns at once, as they reach it. :class:`LeafPack` copies the
parameters those evaluations read into one contiguous float64 record per leaf: the leaf's log
weight; per column truncated normal ``lo, hi, mu, sigma, lognorm``, uniform ``lo, hi``,
categorical ``log rest`` and the bit mask of its listed levels (columns of at most
:data:`MASK_LEVELS` levels: a level's rank among the listed ones is a popcount, not a search);
the listed levels' ``(start, end)`` per categorical column (16-bit codes); the allowed-level
bits; then the leaf's listed levels, their log probabilities and their codes. A leaf costs a
few consecutive cache lines, and scoring it takes no logarithm.
:func:`leaf_log_weight` evaluates ``log pi_k + sum_j log g_kj(x_j)`` in the column order of
:meth:`GenerativeForest.log_prob` with the operations of :meth:`LeafModel.log_prob`, except
that an unlisted allowed level scores ``log rest + log base`` where the leaf model takes
``log(rest * base)`` (an ulp apart). Leaf models without an in-kernel evaluator
(:func:`leaf_kind` 0: no declared packed form, e.g. point masses and rounded-normal tails)
are left to the per-column paths. A model whose columns are stacked leaves with a tail of
trees that never split (the back-off of :mod:`~forestgen.families.mixture.backoff`) is packed
by its :func:`fused_head`: the trees before the tail with each column's first part; the walk
scores the tail's leaves itself (:mod:`.marginal_walk`).

Memory: ``8 (L h + nnz + sum_k ceil(nnz_k / 4) + 2)`` bytes of records for ``L`` leaves with
``nnz`` listed levels (``nnz_k`` in leaf ``k``) and ``h = 1 + 5 n_truncnorm + 2 n_categorical +
2 n_uniform + ceil((1 + 2 n_categorical) / 4) + ceil(b / 8)`` words, ``b`` the bytes of the
allowed-level bits (codes take 32 bits and ``/ 4`` becomes ``/ 2`` when the categorical
columns have 65,536 levels or more in all); ``8 (L + 1)`` for the records' offsets, ``16``
per node and ``16 L`` for the leaf order, plus a few per column (and ``8 L`` per numeric
column whose leaf means a query has mixed, :meth:`LeafPack.leaf_means`). The pack is built on
first use and kept while the model lives (:func:`leaf_pack`): the first query that walks it
builds it, for every learner and for a model loaded from a file (ARF's FORDE does not, so that
a model used only for sampling never holds it).
"""

from __future__ import annotations

import weakref
from typing import Any, NamedTuple

import numpy as np
from llvmlite import ir
from numba import njit, prange, types
from numba.extending import intrinsic
from numba.typed import List

from forestgen.parallel import parallel_kernel, sized

TRUNCNORM, CATEGORICAL, UNIFORM = 1, 2, 3
_WIDTH = {TRUNCNORM: 5, CATEGORICAL: 2, UNIFORM: 2}
MASK_LEVELS = 64  # levels up to which a categorical column's listed levels have a bit mask
CODE16 = 2**16  # categorical levels in all below which a record's codes take 16 bits
#: places in :attr:`LeafPack.args` of the arrays that kernels of other modules read
REC, START, POS, KIND, BASE, NLEV = 0, 3, 5, 6, 9, 11


FORMS = {"truncnorm": TRUNCNORM, "categorical": CATEGORICAL, "uniform": UNIFORM}


def leaf_kind(lm) -> int:
    """The in-kernel evaluator of a leaf model: its declared
    :attr:`~forestgen.leaves.base.LeafModel.packed_form` where it declares the point factor
    (0: none, the per-column paths call its methods)."""
    if "point" not in lm.packed_factors:
        return 0
    return FORMS.get(lm.packed_form, 0)


def supported_columns(model) -> np.ndarray:
    """bool ``[d]``: columns whose point evidence the in-kernel factors can weigh (of a model
    with a :func:`fused_head`, the head's leaf models: the walk scores the tail itself)."""
    head = fused_head(model)
    models = (model if head is None else head).leaf_models_
    return np.array([leaf_kind(lm) > 0 for lm in models], bool)


class FusedHead:
    """The part of a model with stacked leaves that the fused walk packs (:func:`fused_head`):
    its first trees (``forest_``, a prefix of the model's nodes and leaves, so leaf ids are
    the model's), their leaf weights and each column's first part as ``leaf_models_``, and
    ``tail``, the model's leaves after them (one per tree: trees that never split, each
    reached by every row), which the walk scores by the enumerating path's scorer."""

    def __init__(self, model, n_trees: int):
        f = model.forest_
        n0, l0 = int(f.node_offsets[n_trees]), int(f.leaf_offsets[n_trees])

        def cut(a, n):
            return a[:n] if len(a) else a

        self.forest_ = type(f)(
            feature=f.feature[:n0], threshold=f.threshold[:n0], nan_left=f.nan_left[:n0],
            left=f.left[:n0], right=f.right[:n0], cat_off=f.cat_off[:n0],
            cat_left=f.cat_left, node_leaf=f.node_leaf[:n0],
            node_offsets=f.node_offsets[: n_trees + 1],
            leaf_offsets=f.leaf_offsets[: n_trees + 1], n_levels=f.n_levels,
            node_value=cut(f.node_value, n0), cell_lower=cut(f.cell_lower, l0),
            cell_upper=cut(f.cell_upper, l0), cell_mask=cut(f.cell_mask, l0),
            leaf_mass=cut(f.leaf_mass, l0))
        self.leaf_log_weight_ = np.array(model.leaf_log_weight_[:l0], np.float64)
        self.leaf_models_ = [lm.parts[0] for lm in model.leaf_models_]
        self.encoder_ = model.encoder_
        self.tail = np.arange(l0, f.n_leaves, dtype=np.int64)


def _find_head(model) -> FusedHead | None:
    """:func:`fused_head`'s test and build."""
    models = model.leaf_models_
    sizes = [getattr(lm, "sizes", None) for lm in models]
    if not models or any(s is None or len(s) < 2 or not hasattr(lm, "parts")
                         for s, lm in zip(sizes, models)):
        return None
    if any(list(s) != list(sizes[0]) for s in sizes):
        return None
    f = model.forest_
    t = int(np.searchsorted(f.leaf_offsets, sizes[0][0]))
    if not (0 < t < f.n_trees and f.leaf_offsets[t] == sizes[0][0]):
        return None
    if (np.diff(f.node_offsets)[t:] != 1).any():  # the tail: trees that never split
        return None
    return FusedHead(model, t)


_HEADS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def fused_head(model) -> FusedHead | None:
    """The :class:`FusedHead` of a model whose every column's leaf model is stacked
    (:class:`~forestgen.families.mixture.stacked.StackedLeaf`, the same parts' sizes) with
    the first part covering the leaves of its first trees and the rest the leaves of trees
    that never split (the back-off tree of :mod:`~forestgen.families.mixture.backoff`); else
    ``None``. Kept while the model lives and its forest, leaf weights and leaf models are the
    same objects."""
    return cached_for(_HEADS, model, (model.forest_, model.leaf_log_weight_,
                                      *model.leaf_models_), _find_head)


class LeafPack:
    """The packed tables (see the module docstring), the leaf records in the order a
    depth-first walk of each tree reaches them (right subtrees first, as
    :func:`~forestgen.tree.kernels.walk_kernel`), with the forest's nodes in that walk order
    too, so the leaves and nodes under a split lie in one stretch of memory.

    :attr:`args` is the ``tabs`` tuple of :func:`leaf_log_weight`: ``rec`` (the records,
    float64; record ``r`` holds leaf ``leaf_id[r]`` at words ``start[r]:start[r + 1]``),
    ``bits`` and ``codes`` (``rec``'s memory as bytes and as level codes), ``start [L + 1]``,
    ``lay`` (header words, codes per word, the code index of a record's ``nnz``), ``pos [d]``
    (first word of each column's fields in a record, -1: unsupported), ``kind [d]``, ``cpos
    [d]`` (code index of each categorical column's ``start``), ``bpos [d]`` (byte of its
    allowed-level bits), ``base [d, kmax]`` and its log, ``nlev [d]``, ``log floor [d]``.
    :attr:`nodes` is ``(node [N, 2] int64, the same memory as float64, roots)``: one 16-byte
    record per node in walk order, ``node[n, 0]`` the threshold (float64 bits) or the
    level-set offset of a nominal split, ``node[n, 1]`` = ``left << 24 | feature << 3 | leaf
    << 2 | nominal << 1 | nan_left``; an internal node's right child is the next node, ``left``
    its left one; a leaf's ``left`` is its record. ``row [L]``: the record of each leaf id.
    """

    def __init__(self, model, nodes: PackedNodes | None = None):
        models = model.leaf_models_
        f = model.forest_
        d = len(models)
        if nodes is None or nodes.forest is not f:
            nodes = pack_nodes(f)
        node, self.leaf_id, self.row, new, self.depth = nodes.arrays
        L = len(self.leaf_id)
        self.nodes = (node, node.view(np.float64), new[f.roots].astype(np.int64))
        lid = self.leaf_id
        kind = np.array([leaf_kind(lm) for lm in models], np.int64)
        mask_levels = MASK_LEVELS
        cats = [j for j in range(d) if kind[j] == CATEGORICAL]
        ncode = sum(models[j].n_levels for j in cats)
        code_t = np.uint16 if ncode < CODE16 else np.int32  # level codes, within-leaf indices
        per = 8 // np.dtype(code_t).itemsize  # codes per 8-byte word
        pos = np.full(d, -1, np.int64)  # word of each column's fields in a record
        w = 1
        for j in range(d):
            if kind[j]:
                pos[j] = w
                w += _WIDTH[int(kind[j])]
        ctl = w  # word of the codes (nnz, then start, end per categorical column)
        cpos = np.zeros(d, np.int64)
        for t, j in enumerate(cats):
            cpos[j] = ctl * per + 1 + 2 * t
        w += -(-(1 + 2 * len(cats)) // per)
        bpos = np.zeros(d, np.int64)  # byte of each categorical column's allowed-level bits
        nb = 8 * w
        for j in cats:
            bpos[j] = nb
            nb += models[j].allowed_.shape[1]
        head = -(-nb // 8)
        counts = [np.diff(models[j].offset_)[lid] for j in cats]
        nnz = np.sum(counts, axis=0) if cats else np.zeros(L, np.int64)
        size = head + nnz + -(-nnz // per)
        start = np.zeros(L + 1, np.int64)
        np.cumsum(size, out=start[1:])
        rec = np.zeros(int(start[-1]) + 2)  # (spare words: see leaf_log_weight)
        bits = rec.view(np.uint8)
        codes = rec.view(code_t)
        o = start[:-1]
        words, fields = [0], [np.asarray(model.leaf_log_weight_, np.float64)]
        kmax = max([models[j].n_levels for j in cats], default=1)
        base = np.zeros((d, kmax))
        nlev = np.zeros(d, np.int64)
        log_floor = np.zeros(d)
        at = np.zeros((len(cats), 4), np.int64)  # word, code index of start, mask?, code base
        listed = []  # per categorical column: offset_, code_, log prob_, log rest_, allowed_
        with np.errstate(divide="ignore"):
            for j in range(d):
                lm, p = models[j], pos[j]
                if kind[j] == TRUNCNORM:
                    if not hasattr(lm, "lognorm_"):
                        lm.log_prob(np.zeros(0, np.int64), np.zeros(0))  # builds lognorm_
                    words += range(p, p + 5)
                    fields += [lm.lo_, lm.hi_, lm.mu_, lm.sigma_, lm.lognorm_]
                elif kind[j] == UNIFORM:
                    words += [p, p + 1]
                    fields += [lm.lo_, lm.hi_]
                elif kind[j] == CATEGORICAL:
                    c = len(listed)
                    at[c] = (p, cpos[j], lm.n_levels <= mask_levels,
                             sum(len(t[1]) for t in listed))
                    listed.append((lm.offset_, lm.code_, np.log(lm.prob_), np.log(lm.rest_),
                                   lm.allowed_))
                    base[j, : lm.n_levels] = lm.base_
                    nlev[j] = lm.n_levels
                    log_floor[j] = np.log(float(lm.floor)) if lm.floor > 0 else -np.inf
        K = len(fields[0])
        cat = (at, np.array([t[0] for t in listed], np.int64).reshape(len(listed), K + 1),
               np.concatenate([t[1] for t in listed] + [np.zeros(0)]).astype(np.int64),
               np.concatenate([t[2] for t in listed] + [np.zeros(0)]),
               np.array([t[3] for t in listed], np.float64).reshape(len(listed), K),
               np.concatenate([t[4] for t in listed] + [np.zeros((K, 0))], axis=1
                              ).astype(np.uint8))
        sized(_fill_records, len(rec))(rec, codes, o, nnz, self.row,
                      np.array([head, per, ctl * per, bpos[cats[0]] if cats else 0], np.int64),
                      (np.array(words, np.int64),
                       List([np.ascontiguousarray(a, np.float64) for a in fields])), cat)
        self.kind, self.pos = kind, pos
        self._means: dict[int, np.ndarray] = {}
        lay = np.array([head, per, ctl * per, mask_levels], np.int64)
        with np.errstate(divide="ignore"):
            self.args = (rec, bits, codes, start, lay, pos, kind, cpos, bpos, base,
                         np.log(base), nlev, log_floor)

    def leaf_means(self, model, j: int) -> np.ndarray:
        """The leaf model means of numeric column ``j`` in record order (computed on first
        use and kept: ``8 L`` bytes per column)."""
        if j not in self._means:
            from forestgen.sampling.support import draw_mean

            self._means[j] = np.asarray(draw_mean(model, j, self.leaf_id), np.float64)
        return self._means[j]

    @property
    def nbytes(self) -> int:
        node, _, roots = self.nodes  # (the second is a view of the first)
        own = [a for k, a in enumerate(self.args) if k not in (1, 2)]  # (views of rec)
        return int(sum(a.nbytes for a in own) + node.nbytes + roots.nbytes
                   + self.row.nbytes + self.leaf_id.nbytes
                   + sum(a.nbytes for a in self._means.values()))


class PackedNodes(NamedTuple):
    """:func:`pack_nodes` of ``forest``: the node records, each leaf's id in record order,
    the record of each leaf id, each node's place in walk order and the largest depth."""

    forest: Any
    arrays: tuple


def pack_nodes(forest, serial: bool = False) -> PackedNodes:
    """The node part of a forest's :class:`LeafPack` (it reads no leaf model, so it can be
    made beside FORDE's leaf fits): the walk order and node records. ``serial``: by the
    kernels' serial twins (on a thread of a pool whose other threads are busy; the same
    arrays)."""
    f = forest
    N = len(f.feature)
    walk = _walk_order.serial if serial else sized(_walk_order, N)
    pack = _pack_nodes.serial if serial else sized(_pack_nodes, N)
    order, tree_start = walk(f.feature, f.left, f.right, f.roots,
                             np.asarray(f.node_offsets, np.int64),
                             int(np.diff(f.node_offsets).max()) if f.n_trees else 1)
    return PackedNodes(f, pack(order, tree_start, f.feature, f.left, f.threshold.view(np.int64),
                               f.cat_off, f.nan_left, f.node_leaf))


_FILL_BLOCK = 512  # records written together by _fill_records


@parallel_kernel
def _fill_records(rec, codes, o, nnz, row, lay, num, cat):
    """Write every leaf's record (``row``: the record of each leaf id), leaf by leaf in id
    order, so the leaf models' arrays are read in order, a block of leaves at a time (the
    block's records stay in cache while they are written): the numeric words ``num = (words,
    src)``, ``rec[o[row[k]] + words[f]] = src[f][k]`` (``src`` a list of arrays, field by
    field within the block); the count of listed levels at code ``lay[2]``; then per
    categorical column ``log rest``, the listed levels' bit mask (where ``at[c, 2]``), their
    ``(start, end)`` codes, log probabilities and level codes; and the allowed-level bytes of
    all categorical columns from byte ``lay[3]``. ``lay = (header words, codes per word,
    ...)``; ``cat = (at, offsets [C, K + 1], level codes, log probabilities (numpy's
    logarithm, so the records are those of a vectorised build bit for bit), log rest [C, K],
    allowed bytes [K, B])``. The blocks are written in parallel: each writes only its
    leaves' records, so any thread count gives the same records."""
    words, src = num
    n = row.shape[0]
    for blk in prange((n + _FILL_BLOCK - 1) // _FILL_BLOCK):
        b0 = blk * _FILL_BLOCK
        b1 = min(n, b0 + _FILL_BLOCK)
        for f in range(words.shape[0]):
            a, w = src[f], words[f]
            for k in range(b0, b1):
                rec[o[row[k]] + w] = a[k]
        _fill_levels(rec, codes, o, nnz, row, lay, cat, b0, b1)


@njit(cache=True, nogil=True)
def _fill_levels(rec, codes, o, nnz, row, lay, cat, b0, b1):
    """The categorical part of the records of leaves ``b0:b1`` (:func:`_fill_records`)."""
    at, offs, code, log_prob, log_rest, allowed = cat
    head, per, nnz_at, bp0 = lay[0], lay[1], lay[2], lay[3]
    bits = rec.view(np.uint8)
    masks = rec.view(np.uint64)
    nby = allowed.shape[1]
    for k in range(b0, b1):
        i = row[k]
        r = o[i]
        codes[r * per + nnz_at] = nnz[i]
        acc = 0
        for c in range(at.shape[0]):
            p, cp, use_mask, cb = at[c, 0], at[c, 1], at[c, 2], at[c, 3]
            a, cnt = offs[c, k], offs[c, k + 1] - offs[c, k]
            rec[r + p] = log_rest[c, k]
            codes[r * per + cp] = acc
            codes[r * per + cp + 1] = acc + cnt
            mask = np.uint64(0)
            for t in range(cnt):
                lev = code[cb + a + t]
                if use_mask:
                    mask |= np.uint64(1) << np.uint64(lev)
                rec[r + head + acc + t] = log_prob[cb + a + t]
                codes[(r + head + nnz[i]) * per + acc + t] = lev
            if use_mask:
                masks[r + p + 1] = mask
            acc += cnt
        for t in range(nby):
            bits[r * 8 + bp0 + t] = allowed[k, t]


@parallel_kernel
def _pack_nodes(order, tree_start, feature, left, thr_bits, cat_off, nan_left, node_leaf):
    """The node records of :class:`LeafPack` (``[N, 2]`` int64, see there) of the nodes in
    walk ``order`` (tree ``b``'s from ``tree_start[b]``), each leaf's id in record order, the
    record of each leaf id, each node's place in walk order and the largest depth, in two
    passes over the nodes, the second tree by tree in parallel (a tree's records depend only
    on its own nodes and the leaves of the trees before it)."""
    N = order.shape[0]
    B = tree_start.shape[0] - 1
    new = np.empty(feature.shape[0], np.int64)
    tree_leaves = np.zeros(B + 1, np.int64)
    for b in prange(B):
        c = 0
        for t in range(tree_start[b], tree_start[b + 1]):
            new[order[t]] = t
            c += feature[order[t]] < 0
        tree_leaves[b + 1] = c
    for b in range(B):
        tree_leaves[b + 1] += tree_leaves[b]
    n_leaves = tree_leaves[B]
    node = np.empty((N, 2), np.int64)
    leaf_id = np.empty(n_leaves, np.int64)
    row = np.empty(n_leaves, np.int64)
    depth = np.zeros(N, np.int64)
    tree_best = np.zeros(B, np.int64)
    for b in prange(B):
        best = 0
        r = tree_leaves[b]
        for t in range(tree_start[b], tree_start[b + 1]):
            n = order[t]
            ft = np.int64(feature[n])
            cat = np.int64(cat_off[n] >= 0)
            if ft < 0:
                lk = np.int64(r)
                leaf_id[r] = node_leaf[n]
                row[leaf_id[r]] = r
                r += 1
            else:
                lk = new[max(np.int64(left[n]), 0)]
                depth[t + 1] = depth[t] + 1
                depth[lk] = depth[t] + 1
                best = max(best, depth[t] + 1)
            node[t, 0] = np.int64(cat_off[n]) if cat else thr_bits[n]
            node[t, 1] = ((lk << 24) | (max(ft, 0) << 3) | (np.int64(ft < 0) << 2)
                          | (cat << 1) | np.int64(nan_left[n] == 1))
        tree_best[b] = best
    return node, leaf_id, row, new, max(tree_best.max(), 0) if B else 0


@parallel_kernel
def _walk_order(feature, left, right, roots, node_offsets, max_nodes):
    """Every node, tree by tree, in depth-first order with right subtrees first, and where
    each tree's nodes start in it (trees walked in parallel, each into its own stretch)."""
    B = roots.shape[0]
    order = np.empty(feature.shape[0], np.int64)
    count = np.zeros(B, np.int64)
    for b in prange(B):
        stack = np.empty(max_nodes + 2, np.int64)
        t = node_offsets[b] - node_offsets[0]
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
        count[b] = t - (node_offsets[b] - node_offsets[0])
    start = np.zeros(B + 1, np.int64)
    for b in range(B):
        start[b + 1] = start[b] + count[b]
    if start[B] == order.shape[0]:  # (every node reached: the stretches are contiguous)
        return order, start
    out = np.empty(start[B], np.int64)
    for b in range(B):
        s = node_offsets[b] - node_offsets[0]
        out[start[b]:start[b + 1]] = order[s:s + count[b]]
    return out, start


_CACHE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def cached_for(cache, model, parts: tuple, build):
    """``build(model)``, kept in ``cache`` (a weak-key dict) while ``parts`` are the same
    objects. The entry holds ``parts`` themselves: keyed by ``id()`` alone, a freed weights
    array's id could be reused by a new one, and a stale table returned for it."""
    hit = cache.get(model)
    if hit is None or len(hit[0]) != len(parts) or any(
            a is not b for a, b in zip(hit[0], parts)):
        hit = (parts, build(model))
        cache[model] = hit
    return hit[1]


def leaf_pack(model, nodes: PackedNodes | None = None) -> LeafPack:
    """The model's :class:`LeafPack` (built on first use, kept while the model lives and its
    leaf models and leaf weights are the same objects). ``nodes``: :func:`pack_nodes` of the
    model's forest, if already made (one of another forest is not used)."""
    return cached_for(_CACHE, model, (model.leaf_log_weight_, *model.leaf_models_),
                      lambda m: LeafPack(m, nodes))


@intrinsic
def _bits(typingctx, x):
    """The bits of float64 ``x`` as a uint64."""
    def codegen(context, builder, sig, args):
        return builder.bitcast(args[0], ir.IntType(64))
    return types.uint64(types.float64), codegen


@intrinsic
def _popcount(typingctx, x):
    """Set bits of uint64 ``x``."""
    def codegen(context, builder, sig, args):
        return builder.ctpop(args[0])
    return types.uint64(types.uint64), codegen


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
def listed_levels(codes, lay, cpos, o, j):
    """``(first, end, code base)`` of categorical column ``j``'s listed levels in the record
    at word ``o``: its pair ``e`` has level ``codes[code base + e]`` and log probability
    ``rec[o + lay[0] + e]``."""
    cb = o * lay[1]
    nnz = np.int64(codes[cb + lay[2]])
    return (np.int64(codes[cb + cpos[j]]), np.int64(codes[cb + cpos[j] + 1]),
            (o + lay[0] + nnz) * lay[1])


@njit(cache=True, nogil=True, inline="always")
def pmf_into(out, i, off, w, add, tabs, r, j):
    """``p(level c | record r)`` for every level ``c`` of categorical column ``j`` (the values
    of :meth:`CategoricalLeaf.probs`) into ``out[i, off + c]``: added with weight ``w``
    (``add``) or written."""
    rec, bits, codes, start, lay, pos, _, cpos, bpos, base, _, nlev, _ = tabs
    o = start[r]
    e, end, cb = listed_levels(codes, lay, cpos, o, j)
    rest = np.exp(rec[o + pos[j]])
    for c in range(nlev[j]):
        if e < end and codes[cb + e] == c:
            v = np.exp(rec[o + lay[0] + e])
            e += 1
        elif (bits[8 * o + bpos[j] + (c >> 3)] >> (c & 7)) & 1:
            v = rest * base[j, c]
        else:
            v = 0.0
        if add:
            out[i, off + c] += w * v
        else:
            out[i, off + c] = v


@njit(cache=True, nogil=True, inline="always")
def add_pmf(acc, i, off, w, tabs, r, j):
    """``acc[i, off + c] += w * p(level c | record r)`` (:func:`pmf_into`)."""
    pmf_into(acc, i, off, w, True, tabs, r, j)


@njit(cache=True, nogil=True, inline="always")
def leaf_pmf(out, off, tabs, r, j):
    """``out[0, off + c] = p(level c | record r)`` (:func:`pmf_into`), for a walk that weighs
    one leaf's pmf into many rows (a logarithm's inverse per listed level once per leaf, not
    once per row)."""
    pmf_into(out, 0, off, 1.0, False, tabs, r, j)


@njit(cache=True, nogil=True, inline="always")
def leaf_log_weight(i, leaf, X, ecols, ne, tabs):
    """``log pi_leaf + sum_j log g_leaf,j(X[i, j])`` over the columns ``ecols[:ne]`` (in
    increasing order; ``tabs`` is :attr:`LeafPack.args`, ``leaf`` a record). A categorical
    value is looked up among its leaf's first four listed levels with selects, not branches
    that depend on the leaf (about 10% faster NaN-marginal scoring on the 1M-row model); the
    loads past the listed levels stay inside ``rec``, which ends with two spare words."""
    rec, bits, codes, start, lay, pos, kind, cpos, bpos, _, lbase, nlev, log_floor = tabs
    o = start[leaf]
    lp = rec[o]
    for q in range(ne):
        j = ecols[q]
        x = X[i, j]
        p = o + pos[j]
        kd = kind[j]
        if kd == TRUNCNORM:
            if x > rec[p] and x <= rec[p + 1]:
                z = (x - rec[p + 2]) / rec[p + 3]
                lp += -0.5 * z * z - rec[p + 4]
            else:
                return -np.inf
        elif kd == CATEGORICAL:
            c = int(x)
            if not (c == x and 0 <= c < nlev[j]):  # no level of the column: no support
                return -np.inf
            cb = o * lay[1]
            lo = np.int64(codes[cb + cpos[j]])
            if nlev[j] <= lay[3]:  # the listed-level bits: its rank among them
                mask = _bits(rec[p + 1])
                sh = np.uint64(c)
                below = np.int64(_popcount(mask & ((np.uint64(1) << sh) - np.uint64(1))))
                hit = lo + below if (mask >> sh) & np.uint64(1) else -1
            else:  # many levels: a binary search of the listed codes
                end = np.int64(codes[cb + cpos[j] + 1])
                cb = (o + lay[0] + np.int64(codes[cb + lay[2]])) * lay[1]
                hi = end
                while lo < hi:
                    mid = (lo + hi) >> 1
                    if codes[cb + mid] < c:
                        lo = mid + 1
                    else:
                        hi = mid
                hit = lo if lo < end and codes[cb + lo] == c else -1
            listed = rec[o + lay[0] + max(hit, 0)]  # a listed level: its stored log
            rest = rec[p] + lbase[j, c]  # another allowed level: log rest + log base
            allowed = (bits[8 * o + bpos[j] + (c >> 3)] >> (c & 7)) & 1
            if hit < 0 and not allowed:  # outside the leaf's cell, as CategoricalLeaf.log_prob
                return -np.inf
            lq = listed if hit >= 0 else rest
            fl = log_floor[j]  # as CategoricalLeaf.log_prob: a level below the floor scores it
            lp += lq if lq > fl else fl
        else:
            a = rec[p]
            b = rec[p + 1]
            if x > a and x <= b:
                lp += -np.log(b - a)
            else:
                return -np.inf
        if lp == -np.inf:
            return lp
    return lp
