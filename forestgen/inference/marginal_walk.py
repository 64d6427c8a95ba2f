"""Fused marginal walks: every leaf a row reaches, scored and summed in one pass (issue 15).

A row with missing entries reaches every leaf whose cell meets its observed values (the
missing columns' splits go both ways; ARF spec §3's marginalisation). The enumerating path
lists those (row, leaf) pairs (:meth:`ForestArrays.reach`), scores them column by column and
combines them. :func:`_batch_walk` instead walks a block of rows through each tree together
(a node splits the rows that reach it into those going left and right, a missing value going
both ways), scores each reached leaf on the row's observed columns as it gets there from the
packed leaf records of :mod:`.leaf_factors`, and folds it into running per-row sums: the
logsumexp of the scores and, for query columns missing in the row, the posterior-weighted
leaf pmfs or means. No list of pairs is built; memory is the output plus a row list per open
node of a block.

* :func:`marginal_log_prob`: the mixture's log density of rows with missing entries;
* :func:`marginal_moments`: the moments behind ``predict_proba``, ``predict`` and
  ``impute(method="expectation")``.

Each row meets its leaves in the enumerating path's order (tree by tree, right subtrees
first) whatever the blocks and threads, so results do not depend on the thread count or on
how rows are batched; they equal the enumerating path's up to rounding (the running
logsumexp rescales where the two-pass one does not).
"""

from __future__ import annotations

import numba
import numpy as np
from numba import prange

from forestgen.inference.leaf_factors import (
    CATEGORICAL,
    leaf_kind,
    leaf_log_weight,
    leaf_pack,
    leaf_pmf,
    route,
    supported_columns,
)
from forestgen.logsumexp import lse_merge, lse_push
from forestgen.parallel import parallel_kernel

BLOCK = 32768  # rows that walk the trees together (more rows share more node and leaf reads)
GROUPS = 16  # tree groups (at most): each (group, block of rows) is one parallel task
TASK_BYTES = 64 * 2**20  # bound on the per-group partial sums of one call to the kernel


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


@parallel_kernel(error_model="numpy")
def _batch_walk(X, XT, ecols, ne, block, bounds, threads, depth, nodes, cat_left, n_levels,
                tabs, gst, gacc, queries):
    """Each row ``q`` of ``X`` adds every leaf it reaches in the trees of group ``g``
    (``bounds[g]:bounds[g + 1]``) to its running sums ``gst[g, q]``
    (:func:`~forestgen.logsumexp.lse_push`) and ``gacc[g, q]`` (the weighted leaf pmfs or
    means of the query columns ``queries`` it misses). ``XT`` is ``X`` column-major,
    ``ecols[q, :ne[q]]`` the row's observed columns. A task is a group of trees and a block
    of rows, and the tasks are dealt out to the ``threads`` in turn. The block's rows walk
    each tree together: a node splits the rows that reach it into those going left and right
    (a missing value goes both ways), so each node and leaf record is read once per block;
    every row meets its leaves tree by tree, right subtrees first, whatever the blocks and
    threads."""
    m, d = X.shape
    node, fnode, roots = nodes
    qcol, qoff, qlev, qrow, qmean = queries
    nq = qcol.shape[0]
    width = gacc.shape[2]
    n_blocks = (m + block - 1) // block
    n_tasks = (bounds.shape[0] - 1) * n_blocks
    for th in prange(threads):
        nbm = min(block, m)
        ws = np.empty((2 * depth + 3) * nbm, np.int64)  # row lists of the open nodes
        sn = np.empty(2 * depth + 4, np.int64)  # stack of (node, first, end) in ws
        slo = np.empty(2 * depth + 4, np.int64)
        shi = np.empty(2 * depth + 4, np.int64)
        rs = np.empty(nbm, np.int64)  # rows going right at a split
        pv = np.empty(width)  # the pmfs of the query columns at the leaf being scored
        seen = np.full(nq, -1, np.int64)  # the leaf visit pv[query t] belongs to
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
                            v = leaf_log_weight(q, r, xb, ecols[r0 + q], ne[r0 + q], tabs)
                            sb[q, 0], sb[q, 1], w, scale = lse_push(sb[q, 0], sb[q, 1], v)
                            if w < 0.0 or nq == 0:
                                continue
                            if scale != 1.0:
                                for c in range(width):
                                    ab[q, c] *= scale
                            for t in range(nq):  # query columns missing in the row
                                j = qcol[t]
                                if np.isnan(xb[q, j]):
                                    o = qoff[t]
                                    if qlev[t] > 0:
                                        if seen[t] != visit:  # the leaf's pmf, once per visit
                                            leaf_pmf(pv, o, tabs, r, j)
                                            seen[t] = visit
                                        for c in range(qlev[t]):
                                            ab[q, o + c] += w * pv[o + c]
                                    else:
                                        ab[q, o] += w * qmean[qrow[t], r]
                        continue
                    xf = XT[(meta >> 3) & 0x1FFFFF, r0: r0 + nb]
                    top = hi  # the rows going left follow the node's rows, then the right
                    nr = 0
                    if (meta >> 1) & 1:
                        for k in range(lo, hi):
                            q = ws[k]
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


@parallel_kernel(error_model="numpy")
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


def walk_rows(X: np.ndarray) -> tuple:
    """:func:`_batch_walk`'s row arrays for encoded rows ``X``: ``(X, X column-major, each
    row's observed columns in increasing order, their count)``."""
    X = np.ascontiguousarray(X, np.float64)
    obs = ~np.isnan(X)
    ecols = np.ascontiguousarray(np.argsort(~obs, axis=1, kind="stable"), np.int64)
    return X, np.ascontiguousarray(X.T), ecols, obs.sum(1).astype(np.int64)


def _walk(model, Z: np.ndarray, queries: tuple, width: int) -> tuple[np.ndarray, np.ndarray]:
    """Runs :func:`_batch_walk` over encoded ``Z``: ``(log sum, acc / sum)`` per row. The
    rows go in the order of the leaves they reach in the first tree (neighbours share
    blocks and paths), in the chunks of :func:`walk_plan`."""
    m = len(Z)
    f = model.forest_
    pack = leaf_pack(model)
    st = np.zeros((m, 2))
    st[:, 0] = -np.inf
    acc = np.zeros((m, width))
    if m:
        order = np.argsort(f.apply(Z, n_trees=1)[:, 0], kind="stable").astype(np.int64)
        threads = numba.get_num_threads()
        chunk, bounds = walk_plan(f.n_trees, width)
        for s in range(0, m, chunk):
            idx = order[s: s + chunk]
            gst = np.empty((len(bounds) - 1, len(idx), 2))
            gacc = np.empty((len(bounds) - 1, len(idx), width))
            _batch_walk(*walk_rows(Z[idx]), min(BLOCK, len(idx)), bounds, threads,
                        pack.depth, pack.nodes, f.cat_left, f.n_levels, pack.args, gst, gacc,
                        queries)
            _fold_groups(gst, gacc, idx, st, acc)
    fin = np.isfinite(st[:, 0])
    with np.errstate(divide="ignore"):
        lognorm = np.where(fin, st[:, 0] + np.log(np.where(fin, st[:, 1], 1.0)), st[:, 0])
    return lognorm, acc / np.where(fin, st[:, 1], np.nan)[:, None]


def fused_rows(model, Z: np.ndarray) -> np.ndarray:
    """bool per row of encoded ``Z``: every observed entry has an in-kernel leaf factor."""
    bad = ~supported_columns(model)
    return ~(~np.isnan(Z) & bad[None, :]).any(1)


def marginal_log_prob(model, Z: np.ndarray) -> np.ndarray:
    """``log sum_k pi_k prod_{j observed} g_kj(z_j)`` over the leaves each row of encoded
    ``Z`` reaches (NaN entries marginalised): the mixture ensembler's log density. Every row
    must pass :func:`fused_rows`."""
    Z = np.ascontiguousarray(Z, np.float64)
    none = (np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64),
            np.zeros(0, np.int64), np.zeros((0, 1)))
    return _walk(model, Z, none, 0)[0]


def moment_columns(model, cols) -> bool:
    """Whether :func:`marginal_moments` can mix every column in ``cols`` (a discrete column
    needs an in-kernel categorical leaf; a numeric one any leaf model with ``mean``)."""
    schema = model.encoder_.schema
    for j in cols:
        lm = model.leaf_models_[j]
        if schema.columns[j].is_discrete:
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
    pack = leaf_pack(model)
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
    lognorm, acc = _walk(model, Z, queries, width)
    out = {}
    for t, j in enumerate(cols):
        o = qoff[t]
        out[j] = acc[:, o: o + qlev[t]] if qlev[t] else acc[:, o]
    return lognorm, out
