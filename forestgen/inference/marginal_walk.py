"""The leaf mixture's one ``log p`` walk: every leaf a row reaches, scored and summed in one
pass (issues 15, 31).

A row reaches every leaf whose cell meets its evidence: its point values (a missing value's
splits go both ways; ARF spec §3's marginalisation), intervals and level sets (each side
they meet). The enumerating path lists those (row, leaf) pairs (:meth:`ForestArrays.reach`),
scores them column by column and combines them; :func:`walk` sums them without listing
them. Its Python driver orders and chunks the rows (:func:`walk_plan`) and bundles the
kernel's inputs (:class:`WalkRows`, :class:`RangeEvidence`, :class:`PackedForest`,
:class:`Plan`); the kernel :func:`_batch_walk` walks a block of rows through each tree
together (a node splits the rows that reach it into those going left and right), scores each
reached leaf as it gets there from the packed leaf records of :mod:`.leaf_factors`
(:func:`~.leaf_factors.leaf_log_weight`, then :func:`~.interval_factors.range_log_factor`
for intervals and level sets) and folds it into running per-row sums: the logsumexp of the
scores and, for query columns missing in the row, the posterior-weighted leaf pmfs or means
(:func:`_add_moments`); :func:`_fold_groups` adds the tree groups' sums. No list of pairs is
built; memory is the output plus a row list per open node of a block. A model with stacked
leaves and a :func:`~.leaf_factors.fused_head` (a backed-off ARF) walks its head's trees so,
and adds the leaves of its tail (trees that never split: every row reaches them) scored by the
enumerating path's pair scorer, for point evidence (:func:`_head_and_tail`).

* :func:`marginal_log_prob`: the mixture's log density of rows, complete or with NaN;
* :func:`marginal_moments`: the moments behind ``predict_proba``, ``predict`` and
  ``impute(method="expectation")``;
* :func:`~.evidence_mass.evidence_log_mass`: ``log p(e)`` of conditions with a point value
  (rows with only intervals and level sets take its pruned range sum).

Each row meets its leaves in the enumerating path's order (tree by tree, right subtrees
first) whatever the blocks and threads, so results do not depend on the thread count or on
how rows are batched; they equal the enumerating path's up to rounding (the running
logsumexp rescales where the two-pass one does not).
"""

from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np
from numba import njit, prange

from forestgen.inference.interval_factors import range_log_factor, range_sides
from forestgen.inference.leaf_factors import (
    BASE,
    CATEGORICAL,
    FusedHead,
    fused_head,
    leaf_kind,
    leaf_log_weight,
    leaf_pack,
    leaf_pmf,
    route,
    supported_columns,
)
from forestgen.logsumexp import lse_merge, lse_push
from forestgen.parallel import parallel_kernel
from forestgen.tree.kernels import EvidenceRows

BLOCK = 32768  # rows that walk the trees together (more rows share more node and leaf reads)
GROUPS = 16  # tree groups (at most): each (group, block of rows) is one parallel task
TASK_BYTES = 64 * 2**20  # bound on the per-group partial sums of one call to the kernel


class WalkRows(NamedTuple):
    """A call's rows: point values ``X [m, d]`` (NaN: none), ``XT`` (``X`` column-major),
    ``ecols [m, d]`` each row's point columns in increasing order and ``ne [m]`` their count."""

    X: np.ndarray
    XT: np.ndarray
    ecols: np.ndarray
    ne: np.ndarray


class RangeEvidence(NamedTuple):
    """The rows' intervals and level sets (:func:`~.interval_factors.evidence_arrays`'s ``lo,
    hi, sact, smask, soff, sk``; ``[0, d]`` arrays where there are none), with each row's
    interval columns ``icols [m, d]`` (``ni [m]`` of them) and level-set columns ``scols``
    (``ns``). ``active``: whether any row has any."""

    lo: np.ndarray
    hi: np.ndarray
    sact: np.ndarray
    smask: np.ndarray
    soff: np.ndarray
    sk: np.ndarray
    icols: np.ndarray
    ni: np.ndarray
    scols: np.ndarray
    ns: np.ndarray
    active: bool


class PackedForest(NamedTuple):
    """What the walk reads of the forest: :class:`~.leaf_factors.LeafPack`'s ``nodes``,
    ``depth`` and leaf records ``tabs``, and the forest's ``cat_left`` and ``n_levels``."""

    nodes: tuple
    depth: int
    tabs: tuple
    cat_left: np.ndarray
    n_levels: np.ndarray


class Plan(NamedTuple):
    """How a call's rows and trees are dealt out: ``block`` rows per task, tree groups
    ``bounds`` (:func:`walk_plan`), ``threads``."""

    block: int
    bounds: np.ndarray
    threads: int


def walk_plan(n_trees: int, width: int) -> tuple[int, np.ndarray]:
    """``(rows per call, group bounds)``: the groups of consecutive trees whose sums the
    parallel tasks compute, at most :data:`GROUPS` of nearly equal sizes, fewer where the
    per-group sums of a call's rows (``width`` moments each) would pass :data:`TASK_BYTES`.
    Both depend on the forest and the query only, never on the threads or the rows, so each
    row's sums are added in the same order whatever the threads and batches."""
    per_row = 8 * (2 + width)
    rows = max(BLOCK, TASK_BYTES // (per_row * GROUPS))
    g = int(max(1, min(GROUPS, n_trees, TASK_BYTES // (per_row * rows))))
    return rows, np.linspace(0, n_trees, g + 1).round().astype(np.int64)


def even_block(m: int) -> int:
    """Rows per task for a call of ``m`` rows: as few blocks as :data:`BLOCK` allows, of
    nearly equal sizes, so the threads that deal the (group, block) tasks in turn get equal
    work (40,000 rows: two blocks of 20,000, not 32,768 and 7,232). Each row's sums do not
    depend on the blocks."""
    n_blocks = max(1, -(-m // BLOCK))
    return max(1, -(-m // n_blocks))


@njit(cache=True, nogil=True, inline="always")
def _add_moments(ab, q, xb, w, r, tabs, queries, pv, seen, visit):
    """Adds leaf record ``r``'s pmfs or means, weighted ``w``, to row ``q``'s moments
    ``ab[q]`` for the query columns the row misses (``pv``: the leaf's pmfs, filled once per
    leaf ``visit``)."""
    qcol, qoff, qlev, qrow, qmean = queries
    for t in range(qcol.shape[0]):
        j = qcol[t]
        if np.isnan(xb[q, j]):
            o = qoff[t]
            if qlev[t] > 0:
                if seen[t] != visit:  # the leaf's pmf, once per visit
                    leaf_pmf(pv, o, tabs, r, j)
                    seen[t] = visit
                for c in range(qlev[t]):
                    ab[q, o + c] += w * pv[0, o + c]
            else:
                ab[q, o] += w * qmean[qrow[t], r]


@parallel_kernel
def _batch_walk(rows, ev, plan, forest, queries, gst, gacc, gcnt):
    """Each row ``q`` adds every leaf it reaches in the trees of group ``g``
    (``plan.bounds[g]:plan.bounds[g + 1]``) to its running sums ``gst[g, q]``
    (:func:`~forestgen.logsumexp.lse_push` of the leaf's log weight under the row's point
    values ``rows`` and intervals and level sets ``ev``) and ``gacc[g, q]`` (the weighted
    leaf pmfs or means of the query columns ``queries`` it misses), and counts them in
    ``gcnt[g, q]`` (where ``gcnt`` has columns). A task is a group of trees and a block of
    rows, and the tasks are dealt out to the threads in turn. The block's rows walk each tree
    together: a node splits the rows that reach it into those going left and right (a
    missing value goes both ways, an interval or level set each way it meets), so each node
    and leaf record is read once per block; every row meets its leaves tree by tree, right
    subtrees first, whatever the blocks and threads."""
    X, XT, ecols, ne = rows
    er = EvidenceRows(X, ev.lo, ev.hi, ev.sact, ev.smask, ev.soff, ev.sk)
    m = X.shape[0]
    block, bounds, threads = plan
    nodes, depth, tabs, cat_left, n_levels = forest
    node, fnode, roots = nodes
    nq = queries[0].shape[0]
    width = gacc.shape[2]
    count = gcnt.shape[1] > 0
    n_blocks = (m + block - 1) // block
    n_tasks = (bounds.shape[0] - 1) * n_blocks
    for th in prange(threads):
        nbm = min(block, m)
        ws = np.empty((2 * depth + 3) * nbm, np.int64)  # row lists of the open nodes
        sn = np.empty(2 * depth + 4, np.int64)  # stack of (node, first, end) in ws
        slo = np.empty(2 * depth + 4, np.int64)
        shi = np.empty(2 * depth + 4, np.int64)
        rs = np.empty(nbm, np.int64)  # rows going right at a split
        pv = np.empty((1, width))  # the pmfs of the query columns at the leaf being scored
        seen = np.full(nq, -1, np.int64)  # the leaf visit pv[query t] belongs to
        scratch = np.zeros((1, tabs[BASE].shape[1]))
        visit = 0
        for task in range(th, n_tasks, threads):
            g = task // n_blocks
            r0 = (task % n_blocks) * block
            nb = min(m, r0 + block) - r0
            xb = X[r0: r0 + nb]
            sb = gst[g, r0: r0 + nb]
            ab = gacc[g, r0: r0 + nb]
            for q in range(nb):
                sb[q, 0] = -np.inf
                sb[q, 1] = 0.0
                for c in range(width):
                    ab[q, c] = 0.0
                if count:
                    gcnt[g, r0 + q] = 0
            for b in range(bounds[g], bounds[g + 1]):
                for q in range(nb):
                    ws[q] = q
                sn[0], slo[0], shi[0] = roots[b], 0, nb
                sp = 1
                while sp > 0:
                    sp -= 1
                    nd, lo, hi = sn[sp], slo[sp], shi[sp]
                    meta = node[nd, 1]
                    if (meta >> 2) & 1:
                        r = meta >> 24
                        visit += 1
                        for k in range(lo, hi):
                            q = ws[k]
                            i = r0 + q
                            v = leaf_log_weight(q, r, xb, ecols[i], ne[i], tabs)
                            if ev.active and v > -np.inf:
                                v = range_log_factor(v, i, r, er, ev.icols[i], ev.ni[i],
                                                     ev.scols[i], ev.ns[i], tabs, scratch)
                            if count:
                                gcnt[g, i] += 1
                            sb[q, 0], sb[q, 1], w, scale = lse_push(sb[q, 0], sb[q, 1], v)
                            if w < 0.0 or nq == 0:
                                continue
                            if scale != 1.0:
                                for c in range(width):
                                    ab[q, c] *= scale
                            _add_moments(ab, q, xb, w, r, tabs, queries, pv, seen, visit)
                        continue
                    xf = XT[(meta >> 3) & 0x1FFFFF, r0: r0 + nb]
                    top = hi  # the rows going left follow the node's rows, then the right
                    nr = 0
                    if ev.active or (meta >> 1) & 1:
                        for k in range(lo, hi):
                            q = ws[k]
                            if np.isnan(xf[q]) and ev.active:
                                side = range_sides(r0 + q, nd, er, node, fnode, cat_left,
                                                   n_levels)
                            else:
                                side = route(xf[q], nd, nodes, cat_left, n_levels)
                            ws[top] = q
                            top += side & 1
                            rs[nr] = q
                            nr += side >> 1
                    else:
                        thr = fnode[nd, 0]
                        for k in range(lo, hi):
                            q = ws[k]
                            x = xf[q]
                            ws[top] = q
                            top += np.int64(not x > thr)  # x <= thr, or x missing
                            rs[nr] = q
                            nr += np.int64(not x <= thr)  # x > thr, or x missing
                    mid = top
                    for k in range(nr):
                        ws[top + k] = rs[k]
                    top += nr
                    if mid > hi:  # left below right: the right subtree is walked first
                        sn[sp], slo[sp], shi[sp] = meta >> 24, hi, mid
                        sp += 1
                    if top > mid:
                        sn[sp], slo[sp], shi[sp] = nd + 1, mid, top
                        sp += 1


@parallel_kernel
def _fold_groups(gst, gacc, order, st, acc):
    """Row ``order[q]``'s sums ``st``, ``acc``: the groups' sums ``gst[:, q]``, ``gacc[:, q]``
    added in group order (:func:`~forestgen.logsumexp.lse_merge`)."""
    n_groups, m, width = gacc.shape
    for q in prange(m):
        i = order[q]
        mx = -np.inf
        tot = 0.0
        for c in range(width):
            acc[i, c] = 0.0
        for g in range(n_groups):
            mx, tot, w, scale = lse_merge(mx, tot, gst[g, q, 0], gst[g, q, 1])
            if w < 0.0:
                continue
            for c in range(width):
                acc[i, c] = acc[i, c] * scale + w * gacc[g, q, c]
        st[i, 0] = mx
        st[i, 1] = tot


def walk_rows(X: np.ndarray) -> WalkRows:
    """:class:`WalkRows` of encoded rows ``X``."""
    X = np.ascontiguousarray(X, np.float64)
    obs = ~np.isnan(X)
    ecols = np.ascontiguousarray(np.argsort(~obs, axis=1, kind="stable"), np.int64)
    return WalkRows(X, np.ascontiguousarray(X.T), ecols, obs.sum(1).astype(np.int64))


def _columns_of(active: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(cols [m, d], count [m])``: each row's active columns in increasing order."""
    cols = np.ascontiguousarray(np.argsort(~active, axis=1, kind="stable"), np.int64)
    return cols, active.sum(1).astype(np.int64)


def range_evidence(Z: np.ndarray, arrays: tuple | None = None) -> RangeEvidence:
    """:class:`RangeEvidence` of the rows of ``Z`` (their point values: a column with one
    takes no interval or level set, as :func:`~.interval_factors.row_columns`) from
    :func:`~.interval_factors.evidence_arrays`'s ``arrays`` (none: no intervals or level
    sets)."""
    m, d = Z.shape
    if arrays is None:
        arrays = (np.zeros((0, d)), np.zeros((0, d)), np.zeros((0, d), bool),
                  np.zeros((m, 0), bool), np.zeros(d, np.int64), np.zeros(d, np.int64))
    lo, hi, sact, smask, soff, sk = arrays
    free = np.isnan(Z)
    ivl = (~np.isnan(lo) & free) if lo.shape[0] else np.zeros((m, d), bool)
    sets = (sact & free & ~ivl) if sact.shape[0] else np.zeros((m, d), bool)
    icols, ni = _columns_of(ivl)
    scols, ns = _columns_of(sets)
    return RangeEvidence(lo, hi, sact, smask, soff, sk, icols, ni, scols, ns,
                         bool(ni.any() or ns.any()))


def _take(ev: RangeEvidence, idx: np.ndarray) -> RangeEvidence:
    """The rows ``idx`` of ``ev``."""
    def rows(a):
        return a[idx] if a.shape[0] else a
    return RangeEvidence(rows(ev.lo), rows(ev.hi), rows(ev.sact),
                         np.ascontiguousarray(ev.smask[idx]), ev.soff, ev.sk, ev.icols[idx],
                         ev.ni[idx], ev.scols[idx], ev.ns[idx], ev.active)


def walk(model, Z: np.ndarray, ev: RangeEvidence | None = None, queries: tuple | None = None,
         width: int = 0, count: bool = False):
    """The leaf mixture's one walk: ``(log sum, acc / sum, leaves)`` per row of encoded ``Z``
    (point values; NaN: none) with intervals and level sets ``ev`` — the log of the summed
    leaf weights ``pi_k prod_j g_kj(e_j)`` over the leaves each row reaches, the posterior
    moments of ``queries`` (:func:`marginal_moments`) and, with ``count``, the leaves scored
    (else ``None``). The rows go in the order of the leaves they reach in the first tree
    (neighbours share blocks and paths), in the chunks of :func:`walk_plan`; each row's
    result does not depend on that order, the chunks or the threads."""
    Z = np.ascontiguousarray(Z, np.float64)
    head = fused_head(model)
    if head is not None and (ev is None or not ev.active):
        return _head_and_tail(model, head, Z, queries, width, count)
    m, d = Z.shape
    f = model.forest_
    pack = leaf_pack(model)
    ev = range_evidence(Z) if ev is None else ev
    if queries is None:
        queries = (np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64),
                   np.zeros(0, np.int64), np.zeros((0, 1)))
    forest = PackedForest(pack.nodes, pack.depth, pack.args, f.cat_left, f.n_levels)
    st = np.zeros((m, 2))
    st[:, 0] = -np.inf
    acc = np.zeros((m, width))
    cnt = np.zeros(m, np.int64) if count else None
    if m:
        order = np.argsort(f.apply(Z, n_trees=1)[:, 0], kind="stable").astype(np.int64)
        chunk, bounds = walk_plan(f.n_trees, width)
        for s in range(0, m, chunk):
            idx = order[s: s + chunk]
            n_groups = len(bounds) - 1
            gst = np.empty((n_groups, len(idx), 2))
            gacc = np.empty((n_groups, len(idx), width))
            gcnt = np.empty((n_groups, len(idx) if count else 0), np.int64)
            plan = Plan(even_block(len(idx)), bounds, numba.get_num_threads())
            _batch_walk(walk_rows(Z[idx]), _take(ev, idx) if ev.active else ev, plan, forest,
                        queries, gst, gacc, gcnt)
            _fold_groups(gst, gacc, idx, st, acc)
            if count:
                cnt[idx] = gcnt.sum(0)
    fin = np.isfinite(st[:, 0])
    with np.errstate(divide="ignore"):
        lognorm = np.where(fin, st[:, 0] + np.log(np.where(fin, st[:, 1], 1.0)), st[:, 0])
    return lognorm, acc / np.where(fin, st[:, 1], np.nan)[:, None], cnt


def _head_and_tail(model, head: FusedHead, Z: np.ndarray, queries: tuple | None, width: int,
                   count: bool):
    """:func:`walk` of a model with a :class:`~.leaf_factors.FusedHead` (point values only):
    the head's trees by the fused walk, the tail's leaves, which every row reaches, by the
    enumerating path's pair scorer (:func:`~.posterior.pair_log_weights`) and its leaf models'
    pmfs and means (``queries`` hold the means of the head's leaves); the two sums added per
    row. Equal to the enumerating path's up to rounding."""
    from forestgen.inference.conditions import Evidence
    from forestgen.inference.posterior import pair_log_weights
    from forestgen.sampling.support import draw_mean

    lognorm, mom, cnt = walk(head, Z, queries=queries, width=width, count=count)
    m, t = len(Z), len(head.tail)
    nan = np.full(Z.shape, np.nan)
    leaf = np.tile(head.tail, m)
    prow = np.repeat(np.arange(m, dtype=np.int64), t)
    v = pair_log_weights(model, Evidence(Z, nan, nan), np.arange(m), leaf, prow).reshape(m, t)
    with np.errstate(divide="ignore", invalid="ignore"):
        total = np.logaddexp(lognorm, np.logaddexp.reduce(v, axis=1))
        fin = np.isfinite(total)
        wh = np.where(fin & np.isfinite(lognorm), np.exp(lognorm - total), 0.0)
        wt = np.where(fin[:, None], np.exp(v - np.where(fin, total, 0.0)[:, None]), 0.0)
    out = np.where(wh[:, None] > 0, wh[:, None] * np.nan_to_num(mom, nan=0.0), 0.0)
    if queries is not None:
        qcol, qoff, qlev = queries[0], queries[1], queries[2]
        for q, j in enumerate(qcol):
            free = np.isnan(Z[:, j])
            o, k = int(qoff[q]), int(qlev[q])
            if k:  # the tail's pmfs, [t, k]
                vals = np.zeros((t, k))
                p = np.asarray(model.leaf_models_[j].probs(head.tail), np.float64)
                vals[:, : min(k, p.shape[1])] = p[:, :k]
            else:
                vals = draw_mean(model, int(j), head.tail)[:, None]
            out[free, o: o + max(k, 1)] += wt[free] @ vals
    out[~fin] = np.nan
    return total, out, None if cnt is None else cnt + t


def fused_rows(model, Z: np.ndarray) -> np.ndarray:
    """bool per row of encoded ``Z``: every observed entry has an in-kernel leaf factor."""
    bad = ~supported_columns(model)
    return ~(~np.isnan(Z) & bad[None, :]).any(1)


def marginal_log_prob(model, Z: np.ndarray) -> np.ndarray:
    """``log sum_k pi_k prod_{j observed} g_kj(z_j)`` over the leaves each row of encoded
    ``Z`` reaches (NaN entries marginalised): the mixture ensembler's log density. Every row
    must pass :func:`fused_rows`."""
    return walk(model, Z)[0]


def moment_columns(model, cols) -> bool:
    """Whether :func:`marginal_moments` can mix every column in ``cols`` (a discrete column
    needs an in-kernel categorical leaf; a numeric one any leaf model with ``mean``)."""
    schema = model.encoder_.schema
    head = fused_head(model)
    for j in cols:
        lm = model.leaf_models_[j]
        if schema.columns[j].is_discrete:
            if head is not None:
                lm = head.leaf_models_[j]
            if leaf_kind(lm) != CATEGORICAL:
                return False
        elif not hasattr(lm, "mean"):
            return False
    return True


def marginal_moments(model, Z: np.ndarray, cols) -> tuple[np.ndarray, dict[int, np.ndarray]]:
    """``(log p(observed), moments)`` per row of encoded ``Z``: under the leaf posterior of the
    row's observed entries (NaN entries marginalised), the mixture ``sum_k w_k pmf_kj``
    (``[m, k]``) of each discrete column ``j`` in ``cols`` and ``sum_k w_k mean_kj`` (``[m]``)
    of each numeric one, for the rows where ``Z[:, j]`` is NaN (0 elsewhere; NaN where the
    row has probability zero). Every row must pass :func:`fused_rows` and ``cols``
    :func:`moment_columns`."""
    Z = np.ascontiguousarray(Z, np.float64)
    schema = model.encoder_.schema
    head = fused_head(model)
    pack = leaf_pack(model if head is None else head)  # (the means: the model's leaf models)
    cols = list(cols)
    qoff, qlev, qrow, means = [], [], [], []
    width = 0
    for j in cols:
        qoff.append(width)
        if schema.columns[j].is_discrete:
            k = model.leaf_models_[j].n_levels
            qlev.append(k)
            qrow.append(0)
            width += k
        else:
            qlev.append(0)
            qrow.append(len(means))
            means.append(pack.leaf_means(model, j))
            width += 1
    queries = (np.asarray(cols, np.int64), np.asarray(qoff, np.int64),
               np.asarray(qlev, np.int64), np.asarray(qrow, np.int64),
               np.ascontiguousarray(means, np.float64).reshape(len(means), -1)
               if means else np.zeros((0, 1)))
    lognorm, acc, _ = walk(model, Z, queries=queries, width=width)
    out = {}
    for t, j in enumerate(cols):
        o = qoff[t]
        out[j] = acc[:, o: o + qlev[t]] if qlev[t] else acc[:, o]
    return lognorm, out
