"""``log p(e)`` per evidence row, without listing leaves (issue 15).

``p(e) = sum_k pi_k prod_{j in E} g_kj(e_j)`` over the leaves of all trees (ARF spec §3). The
enumerating path (:func:`~.posterior.iter_posterior`) lists every leaf the evidence reaches as
(row, leaf) pairs and scores them column by column; with interval or level-set evidence a row
reaches ~10^5 leaves of a 1M-row forest, so listing them is what costs. :func:`evidence_log_mass`
sums the same leaves without listing them. Rows with a point value go through the leaf
mixture's one walk, :func:`~.marginal_walk.walk` (the walk of ``log_prob`` and the NaN
marginals, here with the rows' intervals and level sets too: it scores every reached leaf in
log space).

Rows whose evidence is only intervals and level sets take :func:`_block_kernel`, that walk
specialised to a range sum. Containment pruning: each node's box (the thresholds and level
sets of the splits above it) is checked against the evidence. Where the box lies inside the
evidence on every evidence column, and every leaf below has its factor on those columns equal
to 1 whenever its box is inside the evidence (:class:`SubtreeTables`: checked per leaf and
column, never assumed), the subtree adds its summed leaf weight and the walk stops there;
only the leaves that straddle the evidence's boundary are scored, in linear space
(:func:`~.interval_factors.row_linear_weight`: erfc tails, a stored tail and ``1 / Z`` per cell
edge, :class:`LinearTables`), summed without a logarithm or exponential per leaf; weights
beyond linear space's reach (far tails, below 1e-280) are scored in log space and summed apart.
Its rows are sorted so that neighbours have similar evidence, and walk each tree in blocks as
the walk's do.

Each row is summed in a fixed order (trees in order, each depth-first), so the result does not
depend on the thread count or on how rows are sorted and batched.
"""

from __future__ import annotations

import math
import weakref
from typing import NamedTuple

import numpy as np
from numba import get_num_threads, njit, prange

from forestgen.inference.conditions import Evidence
from forestgen.inference.interval_factors import (
    LOGZ_MIN,
    SQRT1_2,
    TINY,
    evidence_arrays,
    kernel_columns,
    kernel_rows,
    range_sides,
    row_linear_weight,
    row_log_weight,
)
from forestgen.inference.leaf_factors import (
    BASE,
    CATEGORICAL,
    KIND,
    NLEV,
    POS,
    REC,
    START,
    TRUNCNORM,
    UNIFORM,
    add_pmf,
    cached_for,
    fused_head,
    leaf_pack,
    supported_columns,
)
from forestgen.inference.marginal_walk import PackedForest, range_evidence, walk
from forestgen.leaves.normal_math import LOG_SQRT_2PI
from forestgen.logsumexp import lse_push, lse_value
from forestgen.parallel import parallel_kernel
from forestgen.tree.kernels import EvidenceRows

BLOCK = 64  # rows that walk the trees together (at most; the pruned linear-space walk)
MASK_COLUMNS = 63  # columns with a containment bit (bit 63: "never")
MASK_LEVELS = 64  # levels of a categorical column whose node level sets are tracked
LOG_TINY = math.log(TINY)  # subtree weights below exp(this) are summed in log space
PMF_TOL = 1e-12  # |sum of a leaf's pmf - 1| below which its support's mass counts as 1


class SubtreeTables:
    """Per packed node of :class:`~.leaf_factors.LeafPack` (walk order): ``logw [N]``, the log
    of the summed leaf weights ``pi_k`` below it, and ``ok [N]`` int64, bit ``j`` set where every
    leaf below has its column-``j`` factor equal to 1 for any interval / level set containing
    the leaf's box (the splits above it): a truncated-normal or uniform cell inside the box
    with finite normaliser, a pmf summing to 1 (within :data:`PMF_TOL`) on levels the box
    allows. Columns beyond :data:`MASK_COLUMNS`, categorical ones with more than
    :data:`MASK_LEVELS` levels and leaf models without in-kernel interval / level-set factors
    get no bit. ``full [d]`` uint64: the level mask of each bit-carrying categorical column.
    Memory: ``16 N`` bytes; built on first use and kept while the model lives
    (:func:`subtree_tables`)."""

    def __init__(self, model):
        pack = leaf_pack(model)
        f = model.forest_
        _, iv, sets = kernel_columns(model)
        tabs = pack.args
        d = len(model.leaf_models_)
        colkind = np.zeros(d, np.int64)
        self.full = np.zeros(d, np.uint64)
        for j in range(min(d, MASK_COLUMNS)):
            kd = int(pack.kind[j])
            if iv[j] and kd in (TRUNCNORM, UNIFORM):
                colkind[j] = kd
            elif sets[j] and kd == CATEGORICAL and tabs[NLEV][j] <= MASK_LEVELS:
                colkind[j] = kd
                k = int(tabs[NLEV][j])
                self.full[j] = np.uint64(2**k - 1)
        self.logw, self.ok = _build(pack.nodes[0], pack.nodes[1], f.cat_left, f.n_levels, tabs,
                                    colkind, pack.depth)

    @property
    def nbytes(self) -> int:
        return int(self.logw.nbytes + self.ok.nbytes + self.full.nbytes)


_CACHE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def subtree_tables(model) -> SubtreeTables:
    """The model's :class:`SubtreeTables` (built on first use, kept while the model lives and
    its forest, leaf models and leaf weights are the same objects)."""
    return cached_for(_CACHE, model, (model.forest_, model.leaf_log_weight_,
                                      *model.leaf_models_), SubtreeTables)


class LinearTables:
    """Per leaf record of :class:`~.leaf_factors.LeafPack`, what scoring a leaf in linear
    space (:func:`~.interval_factors.row_linear_weight`) reads besides the record: ``pi [L]``
    the leaf weights (-1 where below :data:`~.interval_factors.TINY`), and per truncated-normal
    column with interval factors (``slot [d]``: its first word, -1 for other columns) three
    words of ``edge [L, 3 t]``: ``erfc(|c| / sqrt 2)`` at the cell's two standardised edges
    ``c`` and ``1 / Z``, the inverse of its normaliser (NaN where ``log Z`` is not finite or
    below :data:`~.interval_factors.LOGZ_MIN`: those leaves are scored in log space).
    Memory: ``8 L (1 + 3 t)`` bytes; built on first use and kept while the model lives
    (:func:`linear_tables`)."""

    def __init__(self, model):
        pack = leaf_pack(model)
        _, iv, _ = kernel_columns(model)
        tabs = pack.args
        kind = tabs[KIND]
        cols = [j for j in range(len(kind)) if iv[j] and kind[j] == TRUNCNORM]
        self.slot = np.full(len(kind), -1, np.int64)
        self.slot[cols] = 3 * np.arange(len(cols))
        o = tabs[START][:-1]
        lw = tabs[REC][o]
        with np.errstate(under="ignore"):
            self.pi = np.where(lw > np.log(TINY), np.exp(np.maximum(lw, np.log(TINY))), -1.0)
        self.pi[lw == -np.inf] = 0.0
        self.edge = np.empty((len(o), 3 * len(cols)))
        for t, j in enumerate(cols):
            _edges(tabs[REC], o + pack.pos[j], self.edge, 3 * t)

    @property
    def nbytes(self) -> int:
        return int(self.pi.nbytes + self.edge.nbytes + self.slot.nbytes)


@njit(cache=True, nogil=True)
def _edges(rec, p, edge, t):
    """Fill ``edge[:, t:t + 3]`` of :class:`LinearTables` from the truncated-normal fields at
    words ``p`` (one per record)."""
    for r in range(p.shape[0]):
        lo, hi, mu, sd, ln = rec[p[r]], rec[p[r] + 1], rec[p[r] + 2], rec[p[r] + 3], \
            rec[p[r] + 4]
        edge[r, t] = math.erfc(abs((lo - mu) / sd) * SQRT1_2) if sd > 0 else np.nan
        edge[r, t + 1] = math.erfc(abs((hi - mu) / sd) * SQRT1_2) if sd > 0 else np.nan
        logz = ln - (math.log(sd) + LOG_SQRT_2PI) if sd > 0 else np.nan
        ok = np.isfinite(logz) and logz > LOGZ_MIN
        edge[r, t + 2] = math.exp(-logz) if ok else np.nan


_LCACHE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def linear_tables(model) -> LinearTables:
    """The model's :class:`LinearTables` (built on first use, kept while the model lives and
    its leaf models and leaf weights are the same objects)."""
    return cached_for(_LCACHE, model, (model.leaf_log_weight_, *model.leaf_models_),
                      LinearTables)


@njit(cache=True, nogil=True, error_model="numpy")
def _left_levels(n, node, fnode, cat_left, n_levels, k):
    """uint64 mask of the level codes ``< k`` (``k <= 64``) that packed split ``n`` sends
    left, as :func:`~.interval_factors.range_sides` routes a level set."""
    meta = node[n, 1]
    m = np.uint64(0)
    if (meta >> 1) & 1:  # nominal: its level set; a level it never saw follows nan_left
        kf = n_levels[(meta >> 3) & 0x1FFFFF]
        for c in range(k):
            if c >= kf:
                go = (meta & 1) == 1
            else:
                go = cat_left[node[n, 0] + c] == 1
            if go:
                m |= np.uint64(1) << np.uint64(c)
    else:
        t = fnode[n, 0]
        for c in range(k):
            if c <= t:
                m |= np.uint64(1) << np.uint64(c)
    return m


@njit(cache=True, nogil=True)
def _build(node, fnode, cat_left, n_levels, tabs, colkind, depth):
    """``(logw, ok)`` of :class:`SubtreeTables`: each leaf checked against its box (nodes in
    walk order, a parent before its children), then summed bottom-up."""
    N = node.shape[0]
    d = colkind.shape[0]
    rec, start, pos, nlev = tabs[REC], tabs[START], tabs[POS], tabs[NLEV]
    parent = np.full(N, -1, np.int64)
    for n in range(N):
        meta = node[n, 1]
        if not (meta >> 2) & 1:
            parent[n + 1] = n
            parent[meta >> 24] = n
    dep = np.zeros(N, np.int64)
    blo = np.empty((depth + 2, d))
    bhi = np.empty((depth + 2, d))
    bm = np.empty((depth + 2, d), np.uint64)
    logw = np.empty(N)
    ok = np.zeros(N, np.int64)
    scratch = np.zeros((1, tabs[BASE].shape[1]))
    for n in range(N):
        p = parent[n]
        t = 0 if p < 0 else dep[p] + 1
        dep[n] = t
        if p < 0:
            for j in range(d):
                blo[0, j] = -np.inf
                bhi[0, j] = np.inf
                bm[0, j] = ~np.uint64(0)
        else:
            for j in range(d):
                blo[t, j] = blo[t - 1, j]
                bhi[t, j] = bhi[t - 1, j]
                bm[t, j] = bm[t - 1, j]
            pm = node[p, 1]
            f = (pm >> 3) & 0x1FFFFF
            left = (pm >> 24) == n
            if colkind[f] == CATEGORICAL:
                lm = _left_levels(p, node, fnode, cat_left, n_levels, nlev[f])
                bm[t, f] &= lm if left else ~lm
            elif colkind[f] > 0:
                if left:
                    bhi[t, f] = min(bhi[t, f], fnode[p, 0])
                else:
                    blo[t, f] = max(blo[t, f], fnode[p, 0])
        meta = node[n, 1]
        if not (meta >> 2) & 1:
            continue
        r = meta >> 24
        o = start[r]
        logw[n] = rec[o]
        bits = np.int64(0)
        for j in range(d):
            kd = colkind[j]
            q = o + pos[j]
            good = False
            if kd == TRUNCNORM:  # _truncnorm_interval is 0.0 for an interval covering the cell
                sd = rec[q + 3]
                logz = rec[q + 4] - (math.log(sd) + LOG_SQRT_2PI) if sd > 0 else np.nan
                good = np.isfinite(logz) and rec[q] >= blo[t, j] and rec[q + 1] <= bhi[t, j]
            elif kd == UNIFORM:
                good = (np.isfinite(rec[q]) and np.isfinite(rec[q + 1])
                        and rec[q + 1] > rec[q] and rec[q] >= blo[t, j]
                        and rec[q + 1] <= bhi[t, j])
            elif kd == CATEGORICAL:
                add_pmf(scratch, 0, 0, 1.0, tabs, r, j)
                tot = 0.0
                sup = np.uint64(0)
                for c in range(nlev[j]):
                    if scratch[0, c] > 0:
                        sup |= np.uint64(1) << np.uint64(c)
                        tot += scratch[0, c]
                    scratch[0, c] = 0.0
                good = (sup & ~bm[t, j]) == 0 and abs(tot - 1.0) <= PMF_TOL
            if good:
                bits |= np.int64(1) << np.int64(j)
        ok[n] = bits
    for n in range(N - 1, -1, -1):
        meta = node[n, 1]
        if (meta >> 2) & 1:
            continue
        a = logw[meta >> 24]
        b = logw[n + 1]
        hi = max(a, b)
        logw[n] = hi if hi == -np.inf else hi + math.log1p(math.exp(min(a, b) - hi))
        ok[n] = ok[meta >> 24] & ok[n + 1]
    return logw, ok


@parallel_kernel
def _block_kernel(X, order, block, ev, forest, tables):
    """The walk (:func:`~.marginal_walk.walk`) for rows with only intervals and level sets
    ``ev`` (:class:`~.marginal_walk.RangeEvidence`) on the packed ``forest``
    (:class:`~.marginal_walk.PackedForest`), specialised to a range sum: blocks of rows
    ``order[k:k + block]`` walking each tree together, pruning contained subtrees
    (:class:`SubtreeTables`) and scoring leaves in linear space (:class:`LinearTables`; the
    few beyond its reach in log space, summed apart; both in ``tables``, :class:`RangeTables`).

    A node splits the block's rows that reach it into those going left and right (both, for
    an evidence that meets both children), so each node and leaf record is read once per
    block; the node's box (the splits above it, on every column) is shared by the rows.
    Each row still meets its leaves and pruned subtrees in its own walk's order (trees in
    order, right subtrees first), whatever the blocks and threads."""
    lo, hi, sact, smask, soff, sk = ev.lo, ev.hi, ev.sact, ev.smask, ev.soff, ev.sk
    er = EvidenceRows(X, lo, hi, sact, smask, soff, sk)
    nodes, depth, tabs, cat_left, n_levels = forest
    logw, okb, full = tables.logw, tables.ok, tables.full
    m = order.shape[0]
    d = full.shape[0]
    node, fnode, roots = nodes
    nlev = tabs[NLEV]
    out = np.empty(X.shape[0])
    scored = np.zeros(X.shape[0], np.int64)
    n_blocks = (m + block - 1) // block
    for blk in prange(n_blocks):
        r0 = blk * block
        nb = min(m, r0 + block) - r0
        ws = np.empty((2 * depth + 3) * nb, np.int64)  # row lists of the open nodes
        sn = np.empty(2 * depth + 4, np.int64)  # stack: node, depth, its rows in ws,
        sd = np.empty(2 * depth + 4, np.int64)  # its parent and side (1 left, 2 right)
        slo = np.empty(2 * depth + 4, np.int64)
        shi = np.empty(2 * depth + 4, np.int64)
        spa = np.empty(2 * depth + 4, np.int64)
        ssd = np.empty(2 * depth + 4, np.int64)
        rs = np.empty(nb, np.int64)
        blo = np.empty((depth + 2, d))  # the box of the node at each depth
        bhi = np.empty((depth + 2, d))
        bm = np.empty((depth + 2, d), np.uint64)
        ic = np.empty((nb, d), np.int64)  # each row's interval and level-set columns
        sc = np.empty((nb, d), np.int64)
        nic = np.zeros(nb, np.int64)
        nsc = np.zeros(nb, np.int64)
        need = np.zeros(nb, np.int64)  # their containment bits
        smb = np.zeros((nb, d), np.uint64)  # the level sets as masks
        mx = np.full(nb, -np.inf)  # running logsumexp of the log-space terms
        acc = np.zeros(nb)
        lsum = np.zeros(nb)  # sum of the linear-space terms
        ecols = np.empty(d, np.int64)
        scratch = np.zeros((1, tabs[BASE].shape[1]))
        for q in range(nb):
            i = order[r0 + q]
            for j in range(d):
                if lo.shape[0] > 0 and not np.isnan(lo[i, j]):
                    ic[q, nic[q]] = j
                    nic[q] += 1
                    need[q] |= np.int64(1) << np.int64(min(j, MASK_COLUMNS))
                elif sact.shape[0] > 0 and sact[i, j]:
                    sc[q, nsc[q]] = j
                    nsc[q] += 1
                    need[q] |= np.int64(1) << np.int64(min(j, MASK_COLUMNS))
                    v = np.uint64(0)
                    for c in range(min(sk[j], MASK_LEVELS)):
                        if smask[i, soff[j] + c]:
                            v |= np.uint64(1) << np.uint64(c)
                    smb[q, j] = v
        for b in range(roots.shape[0]):
            for q in range(nb):
                ws[q] = q
            sn[0], sd[0], slo[0], shi[0] = roots[b], 0, 0, nb
            for j in range(d):
                blo[0, j] = -np.inf
                bhi[0, j] = np.inf
                bm[0, j] = full[j]
            sp = 1
            while sp > 0:
                sp -= 1
                n, t, a0, a1 = sn[sp], sd[sp], slo[sp], shi[sp]
                meta = node[n, 1]
                if (meta >> 2) & 1:
                    r = meta >> 24
                    for k in range(a0, a1):
                        q = ws[k]
                        i = order[r0 + q]
                        scored[i] += 1
                        w = row_linear_weight(i, r, er, ic, nic[q], sc, nsc[q], tabs, tables,
                                              q)
                        if w >= 0.0:
                            lsum[q] += w
                        else:
                            v = row_log_weight(i, r, er, ecols, 0, ic[q], nic[q], sc[q],
                                               nsc[q], tabs, scratch)
                            mx[q], acc[q], _, _ = lse_push(mx[q], acc[q], v)
                    continue
                if t > 0:  # the box: the parent's, cut by its split
                    p = spa[sp]
                    for j in range(d):
                        blo[t, j] = blo[t - 1, j]
                        bhi[t, j] = bhi[t - 1, j]
                        bm[t, j] = bm[t - 1, j]
                    pm = node[p, 1]
                    f = (pm >> 3) & 0x1FFFFF
                    if full[f] != 0:
                        lm = _left_levels(p, node, fnode, cat_left, n_levels,
                                          min(nlev[f], MASK_LEVELS))
                        bm[t, f] &= lm if ssd[sp] == 1 else ~lm
                    elif not (pm >> 1) & 1:
                        if ssd[sp] == 1:
                            bhi[t, f] = min(bhi[t, f], fnode[p, 0])
                        else:
                            blo[t, f] = max(blo[t, f], fnode[p, 0])
                okn = okb[n]
                top = a1  # the rows going left follow the node's rows, then those going right
                nr = 0
                for k in range(a0, a1):
                    q = ws[k]
                    i = order[r0 + q]
                    inside = (okn & need[q]) == need[q]  # the box inside the evidence
                    for k2 in range(nic[q] if inside else 0):  # (written out, not a helper
                        j = ic[q, k2]  # taking arrays: the serial twin would count references)
                        if not (lo[i, j] <= blo[t, j] and bhi[t, j] <= hi[i, j]):
                            inside = False
                            break
                    for k2 in range(nsc[q] if inside else 0):
                        j = sc[q, k2]
                        if bm[t, j] & ~smb[q, j]:
                            inside = False
                            break
                    if inside:
                        v = logw[n]  # every leaf below weighs pi_k: add their sum, stop
                        if v > LOG_TINY:
                            lsum[q] += np.exp(v)
                        else:
                            mx[q], acc[q], _, _ = lse_push(mx[q], acc[q], v)
                        continue
                    s = range_sides(i, n, er, node, fnode, cat_left, n_levels)
                    ws[top] = q
                    top += s & 1
                    rs[nr] = q
                    nr += s >> 1
                mid = top
                for k in range(nr):
                    ws[top + k] = rs[k]
                top += nr
                if mid > a1:  # left below right: the right subtree is walked first
                    sn[sp], sd[sp], slo[sp], shi[sp] = meta >> 24, t + 1, a1, mid
                    spa[sp], ssd[sp] = n, 1
                    sp += 1
                if top > mid:
                    sn[sp], sd[sp], slo[sp], shi[sp] = n + 1, t + 1, mid, top
                    spa[sp], ssd[sp] = n, 2
                    sp += 1
        for q in range(nb):
            i = order[r0 + q]
            a = lse_value(mx[q], acc[q])
            c = np.log(lsum[q]) if lsum[q] > 0.0 else -np.inf
            top_ = max(a, c)
            out[i] = top_ if top_ == -np.inf else top_ + np.log1p(np.exp(min(a, c) - top_))
    return out, scored


class RangeTables(NamedTuple):
    """What :func:`_block_kernel` reads besides the forest: :class:`SubtreeTables`' ``logw``,
    ``ok``, ``full`` and :class:`LinearTables`' ``pi``, ``edge``, ``slot``."""

    logw: np.ndarray
    ok: np.ndarray
    full: np.ndarray
    pi: np.ndarray
    edge: np.ndarray
    slot: np.ndarray


def _similar_order(lo: np.ndarray, hi: np.ndarray, smask: np.ndarray) -> np.ndarray:
    """Rows sorted so that neighbours have similar evidence (and a block's rows share
    subtrees): by interval midpoints (an open end: the other end) column by column, then
    level sets."""
    keys = []
    if lo.shape[0]:
        a = np.where(np.isfinite(lo), lo, hi)
        z = np.where(np.isfinite(hi), hi, lo)
        with np.errstate(invalid="ignore"):  # (the whole line: no key)
            mid = np.nan_to_num(0.5 * (a + z), nan=0.0, posinf=0.0, neginf=0.0)
        keys += [mid[:, j] for j in range(mid.shape[1])]
    if smask.shape[1]:
        keys += [np.packbits(smask, axis=1).view(np.uint8)[:, k]
                 for k in range(-(-smask.shape[1] // 8))]
    if not keys:
        return np.arange(max(lo.shape[0], smask.shape[0]), dtype=np.int64)
    return np.lexsort(keys[::-1]).astype(np.int64)


def head_rows(model, ev: Evidence, rows: np.ndarray) -> np.ndarray:
    """bool per row of ``rows`` of a model with a :func:`~.leaf_factors.fused_head`: point
    evidence only, on columns the head's leaf factors weigh (the walk's head and tail; its
    tail takes no intervals or level sets)."""
    ok = ~(~np.isnan(ev.point[rows]) & ~supported_columns(model)).any(1)
    ok &= np.isnan(ev.lo[rows]).all(1)
    for a, _ in ev.sets.values():
        ok &= ~a[rows]
    return ok


def evidence_log_mass(model, ev: Evidence, rows: np.ndarray | None = None, prune: bool = True,
                      leaves: bool = False):
    """``(done, log p(e))`` for the evidence rows ``rows`` (default all): ``done`` marks the
    rows whose evidence has in-kernel factors (:func:`~.interval_factors.kernel_rows`; of a
    model with a :func:`~.leaf_factors.fused_head`, also :func:`head_rows`) and were summed
    here; the others (NaN in the result) are left to the enumerating path.
    ``prune=False`` scores every reached leaf in log space (the unpruned walk of the log
    weights, a reference for the pruned linear-space one); ``leaves=True`` adds a third
    result, the leaves scored per row (-1 where not done)."""
    rows = np.arange(ev.m) if rows is None else np.asarray(rows, np.int64)
    out = np.full(len(rows), np.nan)
    cnt = np.full(len(rows), -1, np.int64)
    done = kernel_rows(model, ev, rows) if len(rows) else np.zeros(0, bool)
    if len(rows) and fused_head(model) is not None:
        done |= head_rows(model, ev, rows)
    sel = rows[done]
    if len(sel):
        model.require_normalised("leaf posterior")
        f = model.forest_
        pack = leaf_pack(model)
        X = np.ascontiguousarray(ev.point[sel])
        blk = np.isnan(X).all(1) & prune  # rows with only intervals and level sets
        if blk.any():
            st, lt = subtree_tables(model), linear_tables(model)
            ranges = range_evidence(X[blk], evidence_arrays(ev, sel[blk]))
            order = _similar_order(ranges.lo, ranges.hi, ranges.smask)
            part = np.flatnonzero(done)[blk]
            out[part], cnt[part] = _block_kernel(
                X[blk], order, max(1, min(BLOCK, -(-len(order) // (4 * get_num_threads())))),
                ranges, PackedForest(pack.nodes, pack.depth, pack.args, f.cat_left, f.n_levels),
                RangeTables(st.logw, st.ok, st.full, lt.pi, lt.edge, lt.slot))
        if (~blk).any():
            Xp = X[~blk]
            ranges = range_evidence(Xp, evidence_arrays(ev, sel[~blk]))
            part = np.flatnonzero(done)[~blk]
            out[part], _, cnt[part] = walk(model, Xp, ranges, count=True)
    return (done, out, cnt) if leaves else (done, out)
