"""Leaf bitsets of energy trees: the Gibbs slice without walking the trees.

A tree's leaves are boxes on the grid. Number a tree's leaves ``0..L-1`` and store, per column
``c`` and code ``k``, the bitset ``M_c(k)`` of the leaves whose box admits ``x_c = k`` (one
``W``-word row of ``uint64``; consecutive codes with the same row share it). The leaves that the
line ``{x with x_j := k, any k}`` crosses are then ``AND_{c != j} M_c(x_c)`` — a few word ANDs
instead of a root-to-leaf walk with data-dependent branches — and each of them adds its value
over its own extent on ``j``: an interval of value codes plus a missing flag for an ordered
``j`` (through a difference array), its code bitset for a nominal ``j``. This is the slice
traversal of spec ``nrgboost_def.md`` §5.2 (T10), reorganised (QuickScorer-style) for the Gibbs
sweep of :mod:`forestgen.families.energy.gibbs` and for
:meth:`~forestgen.families.energy.ensembler.AdditiveEnergy.energy_slice`.

Leaves are numbered in right-first depth-first order, the order in which the depth-first slice
walk these tables replace reached them, so the sums are formed in the same order (the walk and
this kernel drew identical chains: ``benchmarks/bench_gibbs_sweep.py --before``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from numba import njit, prange
from numba.cpython.unsafe.numbers import trailing_zeros

from forestgen.parallel import parallel_kernel

ALL = np.uint64(0xFFFFFFFFFFFFFFFF)


class LeafSetView(NamedTuple):
    """The arrays of :class:`LeafSets` that the slice kernels read, with each leaf's value
    ``leaf_value [T, cap]`` (0 in unused slots)."""

    code_row: np.ndarray
    masks: np.ndarray
    leaf_value: np.ndarray
    span: np.ndarray
    mi: np.ndarray
    codes: np.ndarray
    nw_off: np.ndarray
    col_ptr: np.ndarray
    cols: np.ndarray


class SplitNodes(NamedTuple):
    """The energy trees' node arrays :func:`_build_tree` reads: split column, children and
    nominal level sets (``cat_off`` into ``cat_left``)."""

    feature: np.ndarray
    left: np.ndarray
    right: np.ndarray
    cat_off: np.ndarray
    cat_left: np.ndarray


@dataclass
class LeafSets:
    """Per tree ``t`` (``T`` trees, ``W`` words, ``cap = 64 W`` leaf slots):

    ``code_row [T, sum(n_codes)]`` int32 — the row of ``masks [R, W]`` holding ``M_c(k)``;
    ``leaf_node [T, cap]`` int32 — global node id of each leaf (-1: no leaf);
    ``span [T, d, cap, 2]`` (:func:`span_dtype`: uint8 up to 255 values a column) and
    ``mi [T, d, cap]`` uint8 — each leaf's extent on each ordered column (value codes
    ``lo <= k < end``, ``lo = end`` if none; ``mi``: admits the missing code);
    ``codes [T, nw_off[d], cap]`` uint64 — each leaf's codes on each nominal column ``c`` as a
    bitset in words ``nw_off[c]..nw_off[c + 1]`` (no words for ordered columns);
    ``col_ptr [T + 1]``, ``cols`` — the columns each tree splits on (ascending).
    """

    code_row: np.ndarray
    masks: np.ndarray
    leaf_node: np.ndarray
    span: np.ndarray
    mi: np.ndarray
    codes: np.ndarray
    nw_off: np.ndarray
    col_ptr: np.ndarray
    cols: np.ndarray

    @property
    def n_trees(self) -> int:
        return len(self.col_ptr) - 1

    @property
    def words(self) -> int:
        return self.masks.shape[1]

    def view(self, value: np.ndarray) -> LeafSetView:
        """The slice kernels' bundle, leaf values taken from the trees' node ``value``."""
        leaf_value = np.where(self.leaf_node >= 0, value[np.maximum(self.leaf_node, 0)], 0.0)
        return LeafSetView(self.code_row, self.masks, leaf_value, self.span, self.mi,
                           self.codes, self.nw_off, self.col_ptr, self.cols)


@njit(cache=True, nogil=True)
def _build_tree(root, nodes, n_codes, n_values, off, nw_off, words, row_base):
    """One tree's tables (see :class:`LeafSets`) from :class:`SplitNodes`; rows numbered from
    ``row_base``."""
    feature, left, right, cat_off, cat_left = nodes
    d = n_codes.shape[0]
    total = off[d]
    cap = 64 * words
    bits = np.zeros((total, words), np.uint64)
    leaf_node = np.full(cap, -1, np.int32)
    span = np.zeros((d, cap, 2), np.int32)
    mi = np.zeros((d, cap), np.uint8)
    codes = np.zeros((nw_off[d], cap), np.uint64)
    # depth-first, right child popped first; each stack entry carries its box (codes admitted)
    stack_n = [root]
    boxes = [np.ones(total, np.uint8)]
    n_leaf = 0
    while len(stack_n) > 0:
        node = stack_n.pop()
        box = boxes.pop()
        f = feature[node]
        if f >= 0:
            o = cat_off[node]
            lbox = box.copy()
            rbox = box
            for k in range(n_codes[f]):
                if cat_left[o + k] == 1:
                    rbox[off[f] + k] = 0
                else:
                    lbox[off[f] + k] = 0
            stack_n.append(left[node])
            boxes.append(lbox)
            stack_n.append(right[node])
            boxes.append(rbox)
            continue
        ell = n_leaf
        n_leaf += 1
        leaf_node[ell] = node
        w = ell >> 6
        b = np.uint64(1) << np.uint64(ell & 63)
        for c in range(d):
            first = -1
            last = -1
            for k in range(n_codes[c]):
                if box[off[c] + k]:
                    bits[off[c] + k, w] |= b
                    if nw_off[c + 1] > nw_off[c]:
                        codes[nw_off[c] + (k >> 6), ell] |= np.uint64(1) << np.uint64(k & 63)
                    if k < n_values[c]:
                        if first < 0:
                            first = k
                        last = k
            span[c, ell, 0] = first if first >= 0 else 0
            span[c, ell, 1] = last + 1 if first >= 0 else 0
            if n_codes[c] > n_values[c] and box[off[c] + n_values[c]]:
                mi[c, ell] = 1
    # one row per run of equal consecutive codes within a column
    code_row = np.empty(total, np.int32)
    keep = np.zeros(total, np.uint8)
    n_rows = 0
    for c in range(d):
        for k in range(n_codes[c]):
            g = off[c] + k
            same = k > 0
            if same:
                for w in range(words):
                    if bits[g, w] != bits[g - 1, w]:
                        same = False
                        break
            if not same:
                keep[g] = 1
                n_rows += 1
            code_row[g] = row_base + n_rows - 1
    rows = np.empty((n_rows, words), np.uint64)
    r = 0
    for g in range(total):
        if keep[g]:
            for w in range(words):
                rows[r, w] = bits[g, w]
            r += 1
    return code_row, rows, leaf_node, span, mi, codes


def span_dtype(n_values: np.ndarray) -> type:
    """The smallest unsigned type of the leaf extents ``span`` (ends up to the most values of a
    column): ``uint8`` up to 255 values, ``uint16`` up to 65,535, else ``int32``."""
    most = int(np.max(n_values, initial=0))
    return np.uint8 if most <= 255 else np.uint16 if most <= 65535 else np.int32


def build_leaf_sets(trees, n_codes: np.ndarray, n_values: np.ndarray, ordered: np.ndarray,
                    words: int, start: int = 0) -> LeafSets:
    """Tables of trees ``start..`` of an :class:`~forestgen.families.energy.ensembler.EnergyTrees`
    on a grid (``n_codes``, ``n_values``, ``ordered`` per column), ``words`` words per bitset
    (at least the most leaves of a tree / 64)."""
    n_codes = np.asarray(n_codes, np.int64)
    n_values = np.asarray(n_values, np.int64)
    off = np.r_[0, np.cumsum(n_codes)].astype(np.int64)
    d, cap = len(n_codes), 64 * int(words)
    nominal = ~np.asarray(ordered, bool)
    nw_off = np.r_[0, np.cumsum(np.where(nominal, -(-n_codes // 64), 0))].astype(np.int64)
    parts = [(np.zeros((0, int(off[-1])), np.int32), np.zeros((0, words), np.uint64),
              np.zeros((0, cap), np.int32), np.zeros((0, d, cap, 2), np.int32),
              np.zeros((0, d, cap), np.uint8), np.zeros((0, int(nw_off[-1]), cap), np.uint64))]
    base = 0
    nodes = SplitNodes(trees.feature, trees.left, trees.right, trees.cat_off, trees.cat_left)
    for r in trees.roots[start:]:
        part = _build_tree(int(r), nodes, n_codes, n_values, off, nw_off, int(words), base)
        base += len(part[1])
        parts.append((part[0][None], part[1], *(p[None] for p in part[2:])))
    uses = trees.uses[start:].reshape(-1, d)
    col_ptr = np.r_[0, np.cumsum(uses.sum(axis=1))].astype(np.int64)
    cols = np.nonzero(uses)[1].astype(np.int64)
    sets = [np.concatenate([p[i] for p in parts]) for i in range(6)]
    sets[3] = sets[3].astype(span_dtype(n_values))  # less memory traffic than int32
    return LeafSets(*sets, nw_off, col_ptr, cols)


def extend(old: LeafSets, new: LeafSets) -> LeafSets:
    """``old`` followed by ``new`` (built with the same ``words``, rows numbered from 0)."""
    rows = len(old.masks)
    return LeafSets(np.concatenate([old.code_row, new.code_row + np.int32(rows)]),
                    np.concatenate([old.masks, new.masks]),
                    np.concatenate([old.leaf_node, new.leaf_node]),
                    np.concatenate([old.span, new.span]), np.concatenate([old.mi, new.mi]),
                    np.concatenate([old.codes, new.codes]),
                    old.nw_off,
                    np.r_[old.col_ptr, old.col_ptr[-1] + new.col_ptr[1:]].astype(np.int64),
                    np.r_[old.cols, new.cols].astype(np.int64))


@njit(cache=True, nogil=True)
def line_leaves(x, j, t, off, code_row, masks, col_ptr, cols, acc):
    """``acc[:W]`` := the leaves of tree ``t`` crossed by the line through ``x`` along ``j``."""
    words = masks.shape[1]
    for w in range(words):
        acc[w] = ALL
    for p in range(col_ptr[t], col_ptr[t + 1]):
        c = cols[p]
        if c != j:
            r = code_row[t, off[c] + x[c]]
            for w in range(words):
                acc[w] &= masks[r, w]


@njit(cache=True, nogil=True, inline="always")
def add_tree(line, t, j, nc, nv, ordered, sets, diff, lg):
    """Add tree ``t``'s part of the slice along ``j`` given the leaves ``line [W]`` that the
    line crosses: an ordered ``j`` into the difference array ``diff`` (and ``lg[nv]`` for the
    missing code), a nominal one into ``lg`` directly (see
    :mod:`~forestgen.families.energy.leaf_sets`); ``sets`` a :class:`LeafSetView`."""
    leaf_value, span, mi, codes, nw_off = sets.leaf_value, sets.span, sets.mi, sets.codes, \
        sets.nw_off
    for w in range(line.shape[0]):
        b = line[w]
        while b != 0:
            ell = w * 64 + trailing_zeros(b)
            b &= b - np.uint64(1)
            v = leaf_value[t, ell]
            if ordered:
                a = span[t, j, ell, 0]
                z = span[t, j, ell, 1]
                if a < z:
                    diff[a] += v
                    diff[z] -= v
                if nc > nv and mi[t, j, ell] == 1:
                    lg[nv] += v
            else:
                for u in range(nw_off[j], nw_off[j + 1]):
                    cb = codes[t, u, ell]
                    k0 = (u - nw_off[j]) * 64
                    while cb != 0:
                        lg[k0 + trailing_zeros(cb)] += v
                        cb &= cb - np.uint64(1)


@njit(cache=True, nogil=True)
def finish_slice(diff, lg, nv, ordered):
    """After :func:`add_tree` over the trees: an ordered column's prefix sum into ``lg``."""
    if ordered:
        a = 0.0
        for k in range(nv):
            a += diff[k]
            lg[k] += a


@parallel_kernel
def slice_logits_kernel(X, j, nc, nv, ordered, off, sets):
    """``[n, nc]``: the tree part of ``f(x with x_j := k)`` for each row of ``X``, summed over
    the trees that split on ``j`` (the others are constant in ``k``), from the leaf bitsets
    ``sets`` (a :class:`LeafSetView`)."""
    code_row, masks, col_ptr, cols = sets.code_row, sets.masks, sets.col_ptr, sets.cols
    n = X.shape[0]
    out = np.zeros((n, nc))
    for i in prange(n):
        line = np.empty(masks.shape[1], np.uint64)
        diff = np.zeros(nv + 1)
        for t in range(col_ptr.shape[0] - 1):
            hit = False
            for p in range(col_ptr[t], col_ptr[t + 1]):
                hit = hit or cols[p] == j
            if hit:
                line_leaves(X[i], j, t, off, code_row, masks, col_ptr, cols, line)
                add_tree(line, t, j, nc, nv, ordered, sets, diff, out[i])
        finish_slice(diff, out[i], nv, ordered)
    return out


@parallel_kernel
def leaf_energy_kernel(C, t0, t1, off, sets, block):
    """``sum_{t0 <= t < t1} value_t(x)`` per row of codes ``C [n, d]``: tree ``t``'s leaf is the
    one bit of ``AND_c M_c(x_c)`` over its columns (no walk, no data-dependent branch). Rows run
    in blocks of ``block``, trees outer, so a tree's tables stay in cache; each row's sum is
    formed tree by tree from 0, as the walk of
    :func:`~forestgen.families.energy.ensembler.energy_kernel` forms it (the same bits)."""
    code_row, masks, leaf_value, col_ptr, cols = sets.code_row, sets.masks, sets.leaf_value, \
        sets.col_ptr, sets.cols
    n = C.shape[0]
    words = masks.shape[1]
    out = np.zeros(n)
    nb = (n + block - 1) // block
    for b in prange(nb):
        i0 = b * block
        i1 = min(n, i0 + block)
        rows = np.empty(C.shape[1], np.int64)  # the mask row of each column of a tree
        for t in range(t0, t1):
            p0 = col_ptr[t]
            k = col_ptr[t + 1] - p0
            for i in range(i0, i1):
                for q in range(k):
                    c = cols[p0 + q]
                    rows[q] = code_row[t, off[c] + C[i, c]]
                ell = 0
                for w in range(words):
                    a = ALL
                    for q in range(k):
                        a &= masks[rows[q], w]
                    if a != 0:
                        ell = w * 64 + trailing_zeros(a)
                        break
                out[i] += leaf_value[t, ell]
    return out
