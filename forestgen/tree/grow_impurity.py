"""Numba histogram tree grower for class-labelled rows under any split criterion.

The criterion is a gain of the children's per-class masses (:mod:`forestgen.tree.criteria`):
built-ins are dispatched by code; :func:`grow_tree_with` compiles this grower for a user gain.
Numba's on-disk cache of this grower is keyed on this file only, not on ``criteria.py``, whose
dispatch it inlines: a change there (a new built-in, as ``rank_variance``) must come with a
change here, or a stale cached grower keeps the old dispatch.

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

* In-bag rows are kept as compact records (codes, label, id, weight: :class:`Records`) in
  ``start, end`` ranges, as in scikit-learn's tree builder, and partitioned *stably*, so every
  node's rows stay in increasing order and the histogram pass reads its records front to back
  (with exact sums, below, the order within a node is free). There are two record buffers: a
  node at depth ``k`` holds its rows in buffer ``k % 2`` and its split moves each record once
  into the other (a count pass, then one branch-free copy of a few 8-byte words per row),
  instead of moving the right-hand rows twice through a scratch buffer.
* A node with fewer rows than a quarter of a feature's bins (``SPARSE_RATIO``; in larger
  nodes listing the occupied bins from flags costs more than one pass over all bins, with
  packed sums) builds a *sparse* histogram:
  only the bins its rows occupy are listed (in increasing order, from flag bytes read eight at
  a time, and a second level of flag bytes that lists the flag words to read), scanned and
  cleared afterwards, so the histograms are all zero between nodes and the fill needs no
  branch per row. Empty bins never change a split's class sums and are left out of the dense
  scan's list too (listed without a branch per bin), so both give the same split.
* The left child's class weights are summed during the partition (the right child's are the
  parent's minus the left's).
* *Exact sums.* When every weight is an integer and they total less than ``2**26`` (bootstrap
  counts, subsamples), every class sum and every square in the Gini gain is an exact integer,
  so no sum depends on the order of its terms. With two classes a record's weight word
  then holds its weight shifted 32 bits per class, and a histogram bin one 64-bit integer
  (class 0 in the low half, class 1 in the high half: sums below ``2**26`` never carry), so
  a row adds to a bin in one integer add, with no label read, and the Gini scan sums the
  packed words and reads both class sums off the total (the values the float sums would
  have; other scans read the bins unpacked into floats). With records of three words a
  split moves its records in one pass, left rows forward from the node's start and right rows
  backward from its end (no count pass), and takes the left child's class sums from the scan
  instead of summing them; a column with fewer than :data:`SPLIT_BINS` bins fills four
  interleaved histograms in a node of at least :data:`FILL4_ROWS` rows (no chain of
  store-to-load waits on its few sums; merging them costs more in smaller nodes); and the two-class
  Gini scan without missing rows computes the parent term once per node, visits only the run
  of split points the size constraints allow (sums are monotone along the scan) and scores a
  point only if a division-free bound says it can reach the best gain so far (with a margin
  far above rounding: a point it skips scores below that gain). Each gives the bits of the
  ordered paths (``tests/tree/test_grow_impurity.py``).
* :func:`grow_tree` is compiled with NumPy's error model: no zero test before each division
  (every divisor in it is positive where it divides) and no exception path, which also lets
  Numba drop reference counting it kept for those paths (the same trees).
* The histogram fill, the candidates' bin scans and the partitions are written out in
  :func:`grow_tree`, not in inlined helpers: Numba gives each array argument of an inlined
  call an atomic reference-count pair that its pruning pass leaves in place around loops
  (about 45 pairs a node before; ``benchmarks/results/grower_floor_s46.md``). For the same
  reason the node loop takes no views of its buffers (``hpk[t]``, ``rcodes[par]``: each one
  a pair of out-of-line atomic calls, 10% of the kernel's samples in a ``perf`` profile at
  8k rows before they went; ~2% remain) and writes out the candidate draw and the split's
  side table instead of calling ``node_ops``.

A forest's trees grown on one thread share one :class:`Workspace` (the records, row ids, node
arrays and stack, sized for every row; ``ImpuritySplitter.tree_grower``): the pages a tree
touches were touched by the tree before, where buffers allocated per tree are fresh pages each
time (ARF at 1M rows, 30 trees, one thread: growing 41.4 -> 37.2 CPU s,
``benchmarks/results/arf_s61.md``). Every entry a tree reads it first writes (a node's arrays
when the node is made), so a tree never sees an earlier tree's values.

Out-of-bag rows (weight 0) take no part in the tree, but with ``route_all`` their records
(their codes and row id: 16 bytes for up to 12 uint8 codes; two buffers likewise) are
partitioned along in one pass (left forward, right backward: their order never matters), so
the grower also returns the node every row reaches (``row_node``): what a forest's out-of-bag
votes and the leaves of its training rows would otherwise need a second pass over all rows and
trees for (``ForestArrays.apply``). Codes
route as the thresholds do (``code <= b`` iff ``x <= thresholds[b]``; missing follows
``nan_left``), so ``row_node`` equals that pass's answer. (Reading the split column's code
of each out-of-bag id from ``Xb`` instead, as before stop 50, is a gather whose rows span
all of ``Xb``'s: at 512k rows and more, once ``Xb``'s rows outgrow the caches, it held about
half of the kernel's time.)

Histograms are built directly for the node's candidate features, ``O(n_node * mtry)``. Sibling
subtraction (LightGBM) is not used: with random-forest ``mtry < d`` each node draws new features,
so the parent's histograms for them do not exist; subtraction would need all ``d`` histograms per
node, ``O(n_small * d)``, which is more work for ``mtry = sqrt(d)``.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit
from numba.cpython.unsafe.numbers import trailing_zeros

from forestgen.tree.criteria import ENTROPY, GINI, criterion_gain, specialise
from forestgen.tree.node_ops import bounded_int_bits

SPLIT_BINS = 32  # a column with fewer bins fills four interleaved histograms (exact sums)
FILL4_ROWS = 256  # ... in a node of at least this many rows (below, merging them costs more)
SPARSE_RATIO = 0.25  # a feature's histogram is sparse when the node has < ratio * n_bins rows
_ONE = np.uint64(1)
_LO32 = np.uint64(0xFFFFFFFF)
_S32 = np.uint64(32)


class Records(NamedTuple):
    """Two buffers (``p = 0, 1``) of ``m`` row records of ``nw`` 8-byte words each, seen
    through four views: ``codes [2, m, nw * 8 / itemsize]`` (the row's ``d`` bin codes, then
    its class label in column ``lab = d``), ``words [2, m, nw]`` (what a partition moves),
    ``weight [2, m, nw]`` (float64; the row's weight in column ``wc = nw - 1``) and
    ``ints [2, m, 2 nw]`` (int32; the row id in column ``idc``, the first after the label).
    For 9 uint8 codes: 24 bytes a record."""

    codes: np.ndarray
    words: np.ndarray
    weight: np.ndarray
    ints: np.ndarray
    lab: int
    idc: int
    wc: int


class LabelledRows(NamedTuple):
    """One tree's rows: bin codes ``Xb [d, n]`` (uint8 / uint16), bins and nominal flag per
    column, class labels ``y [n]`` and bootstrap weights ``w [n]`` (0: out of bag)."""

    Xb: np.ndarray
    n_bins: np.ndarray
    nominal: np.ndarray
    y: np.ndarray
    w: np.ndarray


class GrowRule(NamedTuple):
    """How one tree grows: ``n_classes``; ``max_depth`` (-1: none); a child's weighted size
    ``>= min_samples_leaf`` and per-class weight ``>= min_class_leaf[c]``; ``max_features``
    candidate columns per node; a split must gain more than ``min_gain`` under criterion code
    ``crit``; ``sparse_ratio`` (see :data:`SPARSE_RATIO`)."""

    n_classes: int
    max_depth: int
    min_samples_leaf: float
    min_class_leaf: np.ndarray
    max_features: int
    min_gain: float
    crit: int
    sparse_ratio: float


def grow_rule(n_classes, max_depth, min_samples_leaf, min_class_leaf, max_features, min_gain,
              crit, sparse_ratio=SPARSE_RATIO) -> GrowRule:
    """A :class:`GrowRule` with the field types the compiled grower expects (one compiled
    specialisation whatever numeric types the caller holds)."""
    return GrowRule(int(n_classes), int(max_depth), float(min_samples_leaf),
                    np.asarray(min_class_leaf, np.float64), int(max_features),
                    float(min_gain), int(crit), float(sparse_ratio))


class Workspace(NamedTuple):
    """A grower's buffers for trees of up to ``m`` in-bag and ``m_out`` out-of-bag rows,
    reused from tree to tree (:func:`workspace`): row ids ``idx [m + 1]`` (int64) and ``oid
    [m_out + 1]`` (int32), in-bag record codes ``rcodes [2, m, k]`` and out-of-bag record
    codes ``ocodes [2, m_out, k_out]`` (``Xb``'s dtype; :class:`Records`), node arrays of
    ``2 m + 1`` nodes (``feature, thr_bin, nan_left, left, right, cat_off``, class weights
    ``value [2 m + 1, C]``) and the depth-first stack ``stack [6, 2 m + 1]``. A tree
    initialises every entry it reads, so what an earlier tree left there never matters."""

    idx: np.ndarray
    oid: np.ndarray
    rcodes: np.ndarray
    ocodes: np.ndarray
    feature: np.ndarray
    thr_bin: np.ndarray
    nan_left: np.ndarray
    left: np.ndarray
    right: np.ndarray
    cat_off: np.ndarray
    value: np.ndarray
    stack: np.ndarray


@njit(cache=True, nogil=True)
def _record_layout(d, isz):
    """Records of ``d`` codes of ``isz`` bytes: in bag, the id's int32 column ``idc``, the
    weight's word ``wc`` and the codes a record ``k``; out of bag, ``oidc`` and ``k_out``."""
    idc = ((d + 1) * isz + 3) // 4
    wc = (4 * (idc + 1) + 7) // 8
    oidc = (d * isz + 3) // 4
    onw = (4 * (oidc + 1) + 7) // 8
    return idc, wc, (wc + 1) * 8 // isz, oidc, onw * 8 // isz


def workspace(Xb: np.ndarray, n_classes: int, m: int, m_out: int) -> Workspace:
    """A :class:`Workspace` for trees of ``Xb [d, n]``'s rows with at most ``m`` in-bag and
    ``m_out`` out-of-bag rows (``m_out = 0``: rows not routed), uninitialised: a tree touches
    only the pages it uses. Allocated by NumPy, which (unlike Numba) asks Linux for
    transparent huge pages: fewer page faults and TLB misses."""
    return _workspace(Xb, int(n_classes), int(m), int(m_out))


def _workspace(Xb, n_classes, m, m_out):
    """:func:`workspace`; compiled as :func:`_fresh_workspace`."""
    _, _, k, _, k_out = _record_layout(Xb.shape[0], Xb.itemsize)
    cap = 2 * max(m, 1) + 1
    return Workspace(np.empty(m + 1, np.int64), np.empty(m_out + 1, np.int32),
                     np.empty((2, m, k), Xb.dtype), np.empty((2, m_out, k_out), Xb.dtype),
                     np.empty(cap, np.int32), np.empty(cap, np.int32), np.empty(cap, np.uint8),
                     np.empty(cap, np.int32), np.empty(cap, np.int32), np.empty(cap, np.int64),
                     np.empty((cap, n_classes)), np.empty((6, cap), np.int64))


_fresh_workspace = njit(cache=True, nogil=True)(_workspace)  # one tree's buffers, in Numba


@njit(cache=True, nogil=True)
def _records(codes, d):
    """:class:`Records` of ``d`` codes a row in the buffers ``codes [2, m, k]``."""
    idc, wc, _, _, _ = _record_layout(d, codes.itemsize)
    return Records(codes, codes.view(np.uint64), codes.view(np.float64), codes.view(np.int32),
                   d, idc, wc)


@njit(cache=True, nogil=True)
def _oob_records(Xb, ids, m, codes):
    """Out-of-bag records of the rows ``ids[:m]`` in buffer 0 of ``codes [2, >= m, k]`` (two
    buffers: a node's rows move to the other): the row's ``d`` codes (``Xb``'s dtype), the
    same memory as 8-byte ``words [2, m, nw]`` and as int32 ``ints [2, m, 2 nw]`` with the
    row id in column ``idc``; returns ``words, ints, idc``."""
    d = Xb.shape[0]
    idc = (d * Xb.itemsize + 3) // 4
    ints = codes.view(np.int32)
    for r in range(m):  # record by record (see _fill_records)
        i = ids[r]
        for j in range(d):
            codes[0, r, j] = Xb[j, i]
        ints[0, r, idc] = i
    return codes.view(np.uint64), ints, idc


@njit(cache=True, nogil=True)
def _fill_records(Xb, idx, m, y, w, R):
    """Records of the rows ``idx[:m]`` in buffer 0: their codes, label, id and weight, one
    record at a time (``d`` sequential streams of ``Xb`` read, each record's line written
    once; column by column rewrote every record's line ``d`` times: at 2M rows and 10
    columns 17.6 -> 6.8 ms a tree: ``benchmarks/results/record_fill_s61.md``)."""
    codes, weight, ints = R.codes, R.weight, R.ints  # (locals: no reference count per row)
    wc, idc, lab = R.wc, R.idc, R.lab
    d = Xb.shape[0]
    for r in range(m):
        i = idx[r]
        for j in range(d):
            codes[0, r, j] = Xb[j, i]
        weight[0, r, wc] = w[i]
        ints[0, r, idc] = i
        codes[0, r, lab] = y[i]


@njit(cache=True, nogil=True)
def _node_cap(n_in, class_w, w_tot, min_samples_leaf, min_class_leaf):
    """Room for every node of a tree of ``n_in`` in-bag rows: each leaf holds an in-bag
    row, weight ``>= min_samples_leaf`` and class weight ``>= min_class_leaf[c]`` (``class_w``:
    the root's), so it has at most ``L`` leaves and ``2 L - 1`` nodes (the bounds by weight
    with a relative margin of ``1e-6`` for rounding in float sums; a bound that is not a
    finite number is not used)."""
    L = max(n_in, 1)
    lim = w_tot / min_samples_leaf * (1.0 + 1e-6) + 1.0
    if lim < L:
        L = max(np.int64(lim), 1)
    for c in range(class_w.shape[0]):
        lim = class_w[c] / min_class_leaf[c] * (1.0 + 1e-6) + 1.0
        if lim < L:
            L = max(np.int64(lim), 1)
    return 2 * L + 1


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


@njit(cache=True, nogil=True, error_model="numpy")
def grow_tree(rows, limits, rng, route_all, ws=None):
    """Grow one tree of :class:`LabelledRows` under a :class:`GrowRule`; see the module
    docstring. Returns flat node arrays (tree-local ids): ``feature, thr_bin, nan_left, left,
    right, cat_off, cat_left, class_weight [n_nodes, C]`` and ``row_node [n]`` (the node each
    row reaches; empty unless ``route_all``). ``limits.sparse_ratio``: a feature's histogram
    is sparse when the node has fewer rows than this times its bins (0: never; any value grows
    the same tree). ``ws``: a :class:`Workspace` for at least this tree's in-bag and
    out-of-bag rows, reused from tree to tree (the same tree as without one); ``None``: the
    buffers are allocated for this tree. At most ``2**31 - 1`` rows."""
    Xb, n_bins, nominal, y, w = rows
    (n_classes, max_depth, min_samples_leaf, min_class_leaf, max_features, min_gain, crit,
     sparse_ratio) = limits
    d = Xb.shape[0]
    n = Xb.shape[1]
    # (no branch per row: whether a bootstrap weight is 0 is a coin flip, mispredicted often)
    n_in = 0
    w_tot = 0.0
    frac = False  # a fractional in-bag weight
    for i in range(n):
        wi = w[i]
        inb = wi > 0.0
        n_in += np.int64(inb)
        w_tot += wi if inb else 0.0
        frac |= inb & (wi != np.floor(wi))
    # integral weights, sums below 2**26: every sum exact in any order
    exact = not frac and w_tot < 2.0**26
    n_out = n - n_in if route_all else 0
    if ws is None:
        W = _fresh_workspace(Xb, n_classes, n_in, n_out)
    else:
        W = ws
        if (W.idx.shape[0] <= n_in or W.rcodes.shape[1] < n_in or W.oid.shape[0] <= n_out
                or W.ocodes.shape[1] < n_out or W.value.shape[1] != n_classes):
            raise ValueError("grow_tree: the workspace is too small for the tree")
    idx_buf = W.idx
    oid = W.oid  # out-of-bag row ids, in order
    q_in = 0
    q_out = 0
    if route_all:  # every id written to both lists, kept in the one its weight says
        for i in range(n):
            inb = np.int64(w[i] > 0.0)
            idx_buf[q_in] = i
            oid[q_out] = i
            q_in += inb
            q_out += 1 - inb
    else:
        for i in range(n):
            idx_buf[q_in] = i
            q_in += np.int64(w[i] > 0.0)
    # out-of-bag records, partitioned along (two buffers: a node's rows move to the other)
    ocodes = W.ocodes
    owords, oints, oidc = _oob_records(Xb, oid, n_out, ocodes)
    onw = owords.shape[2]
    # compact in-bag row records, contiguous per node, in two buffers: a node at depth k
    # keeps its rows in buffer k % 2 and partitions them into the other
    if Xb.itemsize < 4 and n_classes > 1 << (8 * Xb.itemsize):  # labels sit in a code slot
        raise ValueError("grow_tree: more classes than the code dtype holds (widen Xb)")
    R = _records(W.rcodes, d)
    _fill_records(Xb, idx_buf, n_in, y, w, R)
    rcodes, rwords, rweight, rints = R.codes, R.words, R.weight, R.ints
    lab, idc, wc = R.lab, R.idc, R.wc
    nw = rwords.shape[2]
    row_node = np.full(n if route_all else 0, -1, np.int32)
    # the root's class weights (in record order; two classes: in registers, + 0.0 for the
    # other class leaves a sum's bits unchanged), then room for every node the limits allow
    root_w = np.zeros(n_classes)
    if n_classes == 2:
        v0 = 0.0
        v1 = 0.0
        for r in range(n_in):
            wr = rweight[0, r, wc]
            c1 = np.float64(rcodes[0, r, lab])
            v0 += wr * (1.0 - c1)
            v1 += wr * c1
        root_w[0] = v0
        root_w[1] = v1
    else:
        for r in range(n_in):
            root_w[rcodes[0, r, lab]] += rweight[0, r, wc]
    cap = _node_cap(n_in, root_w, w_tot, min_samples_leaf, min_class_leaf)
    if cap > W.feature.shape[0]:
        raise ValueError("grow_tree: the workspace is too small for the tree")
    # node arrays (entries set as each node is made: a reused workspace holds old trees)
    feature, thr_bin, nan_left, left, right = W.feature, W.thr_bin, W.nan_left, W.left, W.right
    cat_off, value = W.cat_off, W.value
    cat_cap = 1024
    cat_buf = np.zeros(cat_cap, np.uint8)
    cat_used = 0
    max_nb = 1
    for f in range(d):
        if n_bins[f] > max_nb:
            max_nb = n_bins[f]
    mtry = min(max(max_features, 1), d)
    n_words = (max_nb + 8) // 8  # flag bytes of bins 0..max_nb, eight to a word
    flags = np.zeros((mtry, 8 * n_words), np.uint8)
    # per-node scratch: histograms hist [mtry, bins + 1, C] (all zero between nodes),
    # occupied-bin flag bytes (seen as uint64 words), sparse bin lists occ (n_occ each),
    # the bin order scanned and nominal sort keys, running / child class sums
    # (bins padded: feature histograms 4 KiB apart would alias in the store buffer)
    hist = np.zeros((mtry, max_nb + 1 + 8 // n_classes + 1, n_classes))
    fwords = flags.view(np.uint64)
    # summary flag bytes: byte k set when flag word k (bins 8k..8k+7) has a set byte
    sflags = np.zeros((mtry, 8 * ((n_words + 7) // 8)), np.uint8)
    swords = sflags.view(np.uint64)
    hist4 = np.zeros((mtry, 4, SPLIT_BINS + 1, n_classes))
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
    bitgen = rng.bit_generator  # (read once: candidate draws below)

    st_node, st_start, st_end = W.stack[0], W.stack[1], W.stack[2]
    st_ostart, st_oend, st_depth = W.stack[3], W.stack[4], W.stack[5]
    st_node[0] = 0
    st_start[0] = 0
    st_end[0] = n_in
    st_ostart[0] = 0
    st_oend[0] = n_out
    st_depth[0] = 0
    sp = 1
    n_nodes = 1
    feature[0] = -1
    thr_bin[0] = -1
    nan_left[0] = 0
    left[0] = -1
    right[0] = -1
    cat_off[0] = -1
    for c in range(n_classes):
        value[0, c] = root_w[c]
    # packed class weights (exact sums, two classes): a record's weight word holds its weight
    # shifted by 32 bits per class (class 0 low, class 1 high); sums below 2**26 never carry,
    # so one integer add per row fills both class sums of a bin (hpk), read as two integers
    packed = exact and n_classes == 2
    if packed:
        for r in range(n_in):
            rwords[0, r, wc] = np.uint64(rweight[0, r, wc]) << (_S32 * np.uint64(rcodes[0, r, lab]))
    hpk = np.zeros((mtry if packed else 0, max_nb + 1 + 8), np.uint64)
    pk4 = np.zeros((mtry if packed else 0, 4, SPLIT_BINS + 1), np.uint64)

    while sp > 0:
        sp -= 1
        node = st_node[sp]
        start = st_start[sp]
        end = st_end[sp]
        ostart = st_ostart[sp]
        oend = st_oend[sp]
        depth = st_depth[sp]
        par = depth % 2
        W = 0.0
        n_pos = 0
        can = True
        for c in range(n_classes):
            W += value[node, c]
            if value[node, c] > 0.0:
                n_pos += 1
            if value[node, c] < 2.0 * min_class_leaf[c]:
                can = False
        if (max_depth >= 0 and depth >= max_depth) or W < 2.0 * min_samples_leaf or n_pos <= 1:
            can = False
        best_f = -1
        if can:
            # candidate features: a partial Fisher-Yates (node_ops.draw_candidates, written
            # out: a call with array arguments costs an atomic reference-count pair each)
            for t in range(mtry):
                s_ = t + bounded_int_bits(bitgen, d - t)
                tmp_f = feats[t]
                feats[t] = feats[s_]
                feats[s_] = tmp_f
            rows = end - start
            for t in range(mtry):
                sparse[t] = rows < sparse_ratio * n_bins[feats[t]]
            # -- per-class weight histograms of the candidates over the node's records (hist
            # is all zero here): one pass over the rows when every candidate is dense; a
            # sparse one also lists (occ[t, :n_occ[t]], increasing) the bins its rows occupy,
            # from flag bytes read eight at a time (the missing bin flagged but not listed)
            any_sparse = False
            for t in range(mtry):
                n_occ[t] = 0
                if sparse[t]:
                    any_sparse = True
            if not any_sparse and not exact:
                for r in range(start, end):
                    yi = rcodes[par, r, lab]
                    wi = rweight[par, r, wc]
                    for t in range(mtry):
                        hist[t, rcodes[par, r, feats[t]], yi] += wi
            else:
                # (unsigned indices: no wraparound per row; no views of the buffers: each
                # view is an atomic reference-count pair, called out of line)
                pu = np.uint64(par)
                labu = np.uint64(lab)
                wcu = np.uint64(wc)
                for t in range(mtry):
                    f = feats[t]
                    fu = np.uint64(f)
                    tu = np.uint64(t)
                    nb = n_bins[f]
                    if not sparse[t]:
                        if exact and nb < SPLIT_BINS and rows >= FILL4_ROWS:
                            # few bins: rows hit the same few sums one after another, a chain
                            # of store-to-load waits; four interleaved copies (exact sums:
                            # merged in any order, the same bits)
                            if packed:
                                for r in range(start, end):
                                    ru = np.uint64(r)
                                    pk4[tu, ru & np.uint64(3), rcodes[pu, ru, fu]] += \
                                        rwords[pu, ru, wcu]
                                for b in range(nb + 1):
                                    hpk[t, b] = ((pk4[t, 0, b] + pk4[t, 1, b])
                                                 + (pk4[t, 2, b] + pk4[t, 3, b]))
                                    pk4[t, 0, b] = 0
                                    pk4[t, 1, b] = 0
                                    pk4[t, 2, b] = 0
                                    pk4[t, 3, b] = 0
                                continue
                            for r in range(start, end):
                                ru = np.uint64(r)
                                hist4[tu, ru & np.uint64(3), rcodes[pu, ru, fu],
                                      rcodes[pu, ru, labu]] += rweight[pu, ru, wcu]
                            for b in range(nb + 1):
                                for c in range(n_classes):
                                    hist[t, b, c] = ((hist4[t, 0, b, c] + hist4[t, 1, b, c])
                                                     + (hist4[t, 2, b, c] + hist4[t, 3, b, c]))
                                    hist4[t, 0, b, c] = 0.0
                                    hist4[t, 1, b, c] = 0.0
                                    hist4[t, 2, b, c] = 0.0
                                    hist4[t, 3, b, c] = 0.0
                        elif packed:
                            for r in range(start, end):
                                ru = np.uint64(r)
                                hpk[tu, rcodes[pu, ru, fu]] += rwords[pu, ru, wcu]
                        else:
                            for r in range(start, end):
                                ru = np.uint64(r)
                                hist[tu, rcodes[pu, ru, fu], rcodes[pu, ru, labu]] += \
                                    rweight[pu, ru, wcu]
                        continue
                    if packed:
                        for r in range(start, end):  # no branch per row
                            ru = np.uint64(r)
                            b = rcodes[pu, ru, fu]
                            flags[tu, b] = 1
                            sflags[tu, b >> 3] = 1  # the flag word of bin b is not all zero
                            hpk[tu, b] += rwords[pu, ru, wcu]
                    else:
                        for r in range(start, end):  # no branch per row
                            ru = np.uint64(r)
                            b = rcodes[pu, ru, fu]
                            flags[tu, b] = 1
                            sflags[tu, b >> 3] = 1
                            hist[tu, b, rcodes[pu, ru, labu]] += rweight[pu, ru, wcu]
                    m = 0
                    for kk in range((nb + 64) // 64):
                        sw = swords[t, kk]
                        if sw == 0:
                            continue
                        swords[t, kk] = 0
                        while sw != 0:  # one set bit per set flag byte, lowest first
                            k = 8 * kk + (np.int64(trailing_zeros(sw)) >> 3)
                            sw &= sw - _ONE
                            wd = fwords[t, k]
                            fwords[t, k] = 0
                            while wd != 0:
                                b = 8 * k + (np.int64(trailing_zeros(wd)) >> 3)
                                wd &= wd - _ONE
                                if b < nb:
                                    occ[t, m] = b
                                    m += 1
                    n_occ[t] = m
            best_gain = min_gain
            best_pos = -1
            best_nl = False
            best_m = 0
            best_l0 = -1.0
            best_l1 = -1.0
            binary = n_classes == 2 and (crit == GINI or crit == ENTROPY)
            # each candidate's bin scan, written out here rather than in inlined helpers: a
            # helper's array arguments cost an atomic reference count pair per call
            for t in range(mtry):
                f = feats[t]
                nb = n_bins[f]
                is_sparse = sparse[t]
                # -- the bins scanned, in order: order_buf[:m], the first n_scan split points
                m = n_occ[t]
                # packed sums: the exact Gini scan (no missing rows) reads them from hpk;
                # any other scan reads them from hist, unpacked here (hpk left all zero)
                fast = packed and crit == GINI and hpk[t, nb] == 0
                if packed and not fast:
                    for q in range(m + 1 if is_sparse else nb + 1):
                        # (sparse: the listed bins, then the missing bin)
                        b = (occ[t, q] if q < m else nb) if is_sparse else q
                        h = hpk[t, b]
                        hist[t, b, 0] = np.float64(np.int64(h & _LO32))
                        hist[t, b, 1] = np.float64(np.int64(h >> _S32))
                        hpk[t, b] = 0
                if is_sparse:
                    for q in range(m):
                        order_buf[q] = occ[t, q]
                miss_w = 0.0
                if not fast:
                    for c in range(n_classes):
                        miss_w += hist[t, nb, c]
                if nominal[f]:  # occupied levels sorted by class ratio (stable)
                    if not is_sparse:
                        m = 0
                        for b in range(nb):
                            if fast:
                                occupied = hpk[t, b] != 0
                            else:
                                tot = 0.0
                                for c in range(n_classes):
                                    tot += hist[t, b, c]
                                occupied = tot > 0.0
                            if occupied:
                                order_buf[m] = b
                                m += 1
                    ref = 0
                    best_v = -1.0
                    for c in range(n_classes):
                        if value[node, c] > best_v:
                            best_v = value[node, c]
                            ref = c
                    for q in range(m):
                        b = order_buf[q]
                        if fast:
                            h = hpk[t, b]
                            h0 = np.float64(np.int64(h & _LO32))
                            h1 = np.float64(np.int64(h >> _S32))
                            keys[q] = (h0 if ref == 0 else h1) / (0.0 + h0 + h1)
                        else:
                            tot = 0.0
                            for c in range(n_classes):
                                tot += hist[t, b, c]
                            keys[q] = hist[t, b, ref] / tot
                    for q in range(1, m):  # stable insertion sort by key
                        kq = keys[q]
                        bq = order_buf[q]
                        k = q - 1
                        while k >= 0 and keys[k] > kq:
                            keys[k + 1] = keys[k]
                            order_buf[k + 1] = order_buf[k]
                            k -= 1
                        keys[k + 1] = kq
                        order_buf[k + 1] = bq
                    n_scan = m - 1
                elif is_sparse:
                    # the last bin is never a split point (everything would go left)
                    n_scan = m - 1 if m > 0 and order_buf[m - 1] == nb - 1 else m
                else:  # the occupied bins, listed without a branch per bin (empty bins
                    # change no sum, so skipping them scores the same split points)
                    m = 0
                    if fast:
                        for b in range(nb):
                            order_buf[m] = b
                            m += np.int64(hpk[t, b] != 0)
                    else:
                        for b in range(nb):
                            order_buf[m] = b
                            tot = 0.0
                            for c in range(n_classes):
                                tot += hist[t, b, c]
                            m += np.int64(tot > 0.0)
                    n_scan = m - 1 if m > 0 and order_buf[m - 1] == nb - 1 else m
                # -- the best split point of this feature: bins order_buf[:pos + 1] go left
                g = -np.inf
                pos = -1
                nl = False
                fl0 = -1.0  # the left child's class sums at pos (exact binary scan), or -1
                fl1 = -1.0
                if fast:  # (= binary, exact, Gini, no missing rows)
                    # exact sums, no missing rows: a child pair's parent term W - sP / W
                    # is the node's (same operands, same bits), computed once. A split
                    # point is scored only if it can reach thr = max(g, best_gain): in real
                    # numbers its gain is base - W + sL / WL + sR / WR, compared without
                    # division (sL WR + sR WL against T WL WR) with a margin of 1e-9 (W +
                    # |thr|), far above the rounding of either side; a point it skips scores
                    # below thr, so cannot be this feature's first best nor beat best_gain
                    p0 = value[node, 0]
                    p1 = value[node, 1]
                    c0 = min_class_leaf[0]
                    c1 = min_class_leaf[1]
                    Wn = 0.0 + p0 + p1
                    base = Wn - (0.0 + p0 * p0 + p1 * p1) / Wn
                    thr = best_gain
                    T = thr - 1e-9 * (Wn + abs(thr)) - base + Wn
                    l0 = 0.0
                    l1 = 0.0
                    # every listed bin is occupied, and weights are positive: the left
                    # sums only grow and the right ones only shrink along the scan, so the
                    # split points every constraint allows are one run of k; skip to its
                    # start, stop at its end, and test only the bound inside it (the left
                    # sums as packed integers: the values of float sums of the same terms)
                    tu = np.uint64(t)
                    lp = np.uint64(0)
                    k = 0
                    while k < n_scan:
                        lp += hpk[tu, np.uint64(order_buf[k])]
                        l0 = np.float64(np.int64(lp & _LO32))
                        l1 = np.float64(np.int64(lp >> _S32))
                        WL = 0.0 + l0 + l1
                        if l0 >= c0 and l1 >= c1 and WL >= min_samples_leaf and WL > 0.0:
                            break
                        k += 1
                    while k < n_scan:
                        r0 = p0 - l0
                        r1 = p1 - l1
                        WL = 0.0 + l0 + l1
                        WR = 0.0 + r0 + r1
                        if r0 < c0 or r1 < c1 or WR < min_samples_leaf or WR <= 0.0:
                            break
                        sL = 0.0 + l0 * l0 + l1 * l1
                        sR = 0.0 + r0 * r0 + r1 * r1
                        if sL * WR + sR * WL >= T * WL * WR:
                            gain = base - (WL - sL / WL)
                            gain -= WR - sR / WR
                            if gain > g:
                                g = gain
                                pos = k
                                nl = WL >= WR
                                fl0 = l0
                                fl1 = l1
                                if g > thr:
                                    thr = g
                                    T = thr - 1e-9 * (Wn + abs(thr)) - base + Wn
                        k += 1
                        if k < n_scan:
                            lp += hpk[tu, np.uint64(order_buf[k])]
                            l0 = np.float64(np.int64(lp & _LO32))
                            l1 = np.float64(np.int64(lp >> _S32))
                elif binary:  # two classes, built-in criterion: sums in scalars
                    m0 = hist[t, nb, 0]
                    m1 = hist[t, nb, 1]
                    p0 = value[node, 0]
                    p1 = value[node, 1]
                    c0 = min_class_leaf[0]
                    c1 = min_class_leaf[1]
                    l0 = 0.0
                    l1 = 0.0
                    for k in range(n_scan):
                        b = order_buf[k]
                        h0 = hist[t, b, 0]
                        h1 = hist[t, b, 1]
                        l0 += h0
                        l1 += h1
                        if 0.0 + h0 + h1 <= 0.0:
                            continue
                        for side in range(2):
                            nan_l = side == 0
                            if miss_w <= 0.0 and not nan_l:
                                continue
                            a0 = l0 + (m0 if nan_l else 0.0)
                            a1 = l1 + (m1 if nan_l else 0.0)
                            r0 = p0 - a0
                            r1 = p1 - a1
                            WL = 0.0 + a0 + a1
                            WR = 0.0 + r0 + r1
                            if (a0 < c0 or r0 < c0 or a1 < c1 or r1 < c1 or WL < min_samples_leaf
                                    or WR < min_samples_leaf or WL <= 0.0 or WR <= 0.0):
                                continue
                            gain = _impurity2(crit, a0, a1, r0, r1)
                            if gain > g:
                                g = gain
                                pos = k
                                nl = nan_l if miss_w > 0.0 else WL >= WR
                else:  # any class count or criterion: sums in lsum, children in lbuf / rbuf
                    for c in range(n_classes):
                        lsum[c] = 0.0
                    for k in range(n_scan):
                        b = order_buf[k]
                        tot = 0.0
                        for c in range(n_classes):
                            lsum[c] += hist[t, b, c]
                            tot += hist[t, b, c]
                        if tot <= 0.0:
                            continue
                        for side in range(2):
                            nan_l = side == 0
                            if miss_w <= 0.0 and not nan_l:
                                continue
                            WL = 0.0
                            WR = 0.0
                            ok = True
                            for c in range(n_classes):
                                lc = lsum[c] + (hist[t, nb, c] if nan_l else 0.0)
                                rc = value[node, c] - lc
                                lbuf[c] = lc
                                rbuf[c] = rc
                                WL += lc
                                WR += rc
                                if lc < min_class_leaf[c] or rc < min_class_leaf[c]:
                                    ok = False
                            if (not ok or WL < min_samples_leaf or WR < min_samples_leaf
                                    or WL <= 0.0 or WR <= 0.0):
                                continue
                            gain = criterion_gain(crit, lbuf, rbuf)
                            if gain > g:
                                g = gain
                                pos = k
                                nl = nan_l if miss_w > 0.0 else WL >= WR
                # -- leave hist[t] (hpk[t]) all zero again (what a sparse fill starts from)
                if fast and is_sparse:
                    for q in range(m):
                        hpk[t, occ[t, q]] = 0
                elif fast:
                    for b in range(nb + 1):
                        hpk[t, b] = 0
                elif is_sparse:
                    for q in range(n_occ[t]):
                        b = occ[t, q]
                        for c in range(n_classes):
                            hist[t, b, c] = 0.0
                    for c in range(n_classes):
                        hist[t, nb, c] = 0.0
                else:
                    for b in range(nb + 1):
                        for c in range(n_classes):
                            hist[t, b, c] = 0.0
                if pos >= 0 and g > best_gain:
                    best_gain = g
                    best_f = f
                    best_pos = pos
                    best_nl = nl
                    best_m = m
                    best_l0 = fl0
                    best_l1 = fl1
                    for q in range(m):
                        best_order[q] = order_buf[q]
        if best_f < 0:
            if route_all:
                for r in range(start, end):
                    row_node[rints[par, r, idc]] = node
                for r in range(ostart, oend):
                    row_node[oints[par, r, oidc]] = node
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
        # go[code]: the side of each code (node_ops.binned_sides, written out)
        # (two loops, no choice per code: the ordered one is a vector compare)
        if nominal[f]:
            for code in range(nb):
                go[code] = cat_buf[off + code] == 1
        else:
            tb = thr_bin[node]
            for code in range(nb):
                go[code] = code <= tb
        go[nb] = best_nl
        lnode = n_nodes
        rnode = n_nodes + 1
        n_nodes += 2
        left[node] = lnode
        right[node] = rnode
        for k in range(lnode, rnode + 1):
            feature[k] = -1
            thr_bin[k] = -1
            nan_left[k] = 0
            left[k] = -1
            right[k] = -1
            cat_off[k] = -1
            for c in range(n_classes):
                value[k, c] = 0.0
        # -- partition of the records start:end of buffer par into the other buffer by
        # go[code of column f], each record moved once, a word copy, without branches (the
        # side is a coin flip per row). Exact sums (integral weights): row order within a
        # node does not matter, so in one pass the left rows go forward from start and the
        # right rows backward from end, and the left child's class sums are the scan's
        # (best_l0, best_l1: the same bits as summing its rows) when it recorded them.
        # Otherwise a stable partition (a count pass, then the left rows first, each side
        # in its order) with the left rows' class weights summed into value[lnode] in row
        # order (+ 0.0 for a right row or the other class leaves a sum's bits unchanged)
        q = 1 - par
        if exact and n_classes == 2 and nw == 3:
            q_l = start
            q_r = end - 1
            if best_l0 >= 0.0:
                pu = np.uint64(par)  # (unsigned indices: no wraparound; no views)
                qu = np.uint64(q)
                fu = np.uint64(f)
                for r in range(start, end):
                    ru = np.uint64(r)
                    g = np.int64(go[rcodes[pu, ru, fu]])
                    pos = np.uint64(q_r + g * (q_l - q_r))
                    w0 = rwords[pu, ru, 0]
                    w1 = rwords[pu, ru, 1]
                    w2 = rwords[pu, ru, 2]
                    rwords[qu, pos, 0] = w0
                    rwords[qu, pos, 1] = w1
                    rwords[qu, pos, 2] = w2
                    q_l += g
                    q_r -= 1 - g
                value[lnode, 0] = best_l0
                value[lnode, 1] = best_l1
            else:
                v0 = value[lnode, 0]
                v1 = value[lnode, 1]
                for r in range(start, end):
                    g = np.int64(go[rcodes[par, r, f]])
                    pos = q_r + g * (q_l - q_r)
                    w0 = rwords[par, r, 0]
                    w1 = rwords[par, r, 1]
                    w2 = rwords[par, r, 2]
                    rwords[q, pos, 0] = w0
                    rwords[q, pos, 1] = w1
                    rwords[q, pos, 2] = w2
                    pw = rwords[par, r, wc]  # packed (exact, two classes)
                    v0 += np.float64(np.int64(pw & _LO32)) * g
                    v1 += np.float64(np.int64(pw >> _S32)) * g
                    q_l += g
                    q_r -= 1 - g
                value[lnode, 0] = v0
                value[lnode, 1] = v1
            mid = q_l
        else:
            n_left = 0
            for r in range(start, end):
                if go[rcodes[par, r, f]]:
                    n_left += 1
            mid = start + n_left
            q_l = start
            q_r = mid
            if n_classes == 2:  # the sums in registers (no store per row)
                v0 = value[lnode, 0]
                v1 = value[lnode, 1]
                for r in range(start, end):
                    g = np.int64(go[rcodes[par, r, f]])
                    pos = q_r + g * (q_l - q_r)
                    for k in range(nw):
                        rwords[q, pos, k] = rwords[par, r, k]
                    if packed:
                        pw = rwords[par, r, wc]
                        v0 += np.float64(np.int64(pw & _LO32)) * g
                        v1 += np.float64(np.int64(pw >> _S32)) * g
                    else:
                        wg = rweight[par, r, wc] * g
                        c1 = np.int64(rcodes[par, r, lab])
                        v0 += wg * (1 - c1)
                        v1 += wg * c1
                    q_l += g
                    q_r += 1 - g
                value[lnode, 0] = v0
                value[lnode, 1] = v1
            else:
                for r in range(start, end):
                    g = np.int64(go[rcodes[par, r, f]])
                    pos = q_r + g * (q_l - q_r)
                    for k in range(nw):
                        rwords[q, pos, k] = rwords[par, r, k]
                    value[lnode, rcodes[par, r, lab]] += rweight[par, r, wc] * g
                    q_l += g
                    q_r += 1 - g
        # -- the out-of-bag records likewise (their order never matters: left forward,
        # right backward, one pass)
        omid = ostart
        if route_all:
            q_l = ostart
            q_r = oend - 1
            pu = np.uint64(par)  # (unsigned indices: no wraparound; no views)
            qu = np.uint64(q)
            fu = np.uint64(f)
            if onw == 2:
                for r in range(ostart, oend):
                    ru = np.uint64(r)
                    g = np.int64(go[ocodes[pu, ru, fu]])
                    pos = np.uint64(q_r + g * (q_l - q_r))
                    w0 = owords[pu, ru, 0]
                    w1 = owords[pu, ru, 1]
                    owords[qu, pos, 0] = w0
                    owords[qu, pos, 1] = w1
                    q_l += g
                    q_r -= 1 - g
            else:
                for r in range(ostart, oend):
                    ru = np.uint64(r)
                    g = np.int64(go[ocodes[pu, ru, fu]])
                    pos = np.uint64(q_r + g * (q_l - q_r))
                    for k in range(onw):
                        owords[qu, pos, k] = owords[pu, ru, k]
                    q_l += g
                    q_r -= 1 - g
            omid = q_l
        for c in range(n_classes):
            value[rnode, c] = value[node, c] - value[lnode, c]
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


@njit(cache=True, nogil=True)
def bin_thresholds(feature, thr_bin, cat_off, flat, off):
    """Each node's threshold in encoded units: ``flat[off[f] + thr_bin]`` at a numeric split
    on column ``f`` (``flat``, ``off``: every column's bin thresholds end to end, see
    :attr:`~forestgen.splitters.base.TreeData.threshold_table`), NaN elsewhere; and whether
    every such bin lies inside its column's thresholds (else the thresholds are not
    filled)."""
    n = feature.shape[0]
    thr = np.full(n, np.nan)
    for i in range(n):
        f = feature[i]
        if f >= 0 and cat_off[i] < 0:
            b = thr_bin[i]
            if b < 0 or b >= off[f + 1] - off[f]:
                return thr, False
            thr[i] = flat[off[f] + b]
    return thr, True


def grow_tree_with(gain):
    """:func:`grow_tree` compiled for the user ``@njit`` ``gain`` (once per process)."""
    return specialise(grow_tree, (), gain)
